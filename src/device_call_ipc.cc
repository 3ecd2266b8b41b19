// DeviceCalls, CUDA-IPC side: which calls take the IPC kernels, the workspace set-up, and the launches
// (kernels/cuda/ipc_allreduce.h, ipc_collectives.h), one piece of at most a slot at a time.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <optional>
#include <string>

#include "core/log.h"
#include "kernels/cuda/ipc_allreduce.h"
#include "kernels/cuda/ipc_collectives.h"
#include "kernels/cuda/reduce.h"
#include "src/device_call.h"
#include "src/device_call_util.h"
#include "src/device_memory.h"
#include "transport/cuda_ipc/ipc_workspace.h"

namespace conflux {
namespace {

/// The IPC kernel family of a collective (all-reduce has its own kernels).
cuda::IpcCollective ipcKind(Collective c) {
  switch (c) {
    case Collective::AllGather: return cuda::IpcCollective::AllGather;
    case Collective::ReduceScatter: return cuda::IpcCollective::ReduceScatter;
    case Collective::AllToAll: return cuda::IpcCollective::AllToAll;
    case Collective::Broadcast: return cuda::IpcCollective::Broadcast;
    default: return cuda::IpcCollective::Reduce;
  }
}

}  // namespace

bool DeviceCalls::ipcEligible(const CallArgs& a, const Places& places, int& device) const {
  if (!ipcEnabled_ || (ipcTried_ && ipc_ == nullptr)) return false;
  if (a.coll == Collective::SendRecv || !setup_.oneNode || setup_.nranks < 2 || setup_.nranks > cuda::kIpcMaxRanks) {
    return false;
  }
  // Every buffer this rank uses must be device memory on one device (non-roots of broadcast and reduce
  // do not use send and receive buffers respectively, and may pass anything there).
  const bool usesSend = !(a.coll == Collective::Broadcast && a.root != setup_.rank);
  const bool usesRecv = !(a.coll == Collective::Reduce && a.root != setup_.rank);
  device = -1;
  for (const auto& [used, p] : {std::pair<bool, BufferPlace>{usesSend, places.send}, {usesRecv, places.recv}}) {
    if (!used) continue;
    if (p.space != MemSpace::Cuda || (device >= 0 && p.device != device)) return false;
    device = p.device;
  }
  return device >= 0;
}

Status DeviceCalls::ensureIpc(int device) {
  if (ipcTried_) {
    if (ipc_ != nullptr && ipc_->device() != device) {
      return Status(Code::InvalidUsage, "sendbuff: on CUDA device " + std::to_string(device) +
                                            ", but this communicator's device buffers are on device " +
                                            std::to_string(ipc_->device()));
    }
    return Status::ok();
  }
  ipcTried_ = true;
  // The handles travel through an all-gather of the communicator itself, on host buffers.
  cuda_ipc::AllGather allGather = [&](const std::vector<uint8_t>& mine, std::vector<uint8_t>& all) {
    all.assign(mine.size() * static_cast<size_t>(setup_.nranks), 0);
    CallArgs g;
    g.coll = Collective::AllGather;
    g.send = mine.data();
    g.recv = all.data();
    g.count = mine.size();
    g.dtype = DataType::Uint8;
    return runHost_(g);
  };
  Status status;
  ipc_ = cuda_ipc::IpcWorkspace::create(setup_.rank, setup_.nranks, device, ipcSlotBytes_, allGather, status);
  if (ipc_ == nullptr) {
    // Every rank got the same verdict; the all-gathers succeeded, so staging still works.
    if (status.code() == Code::CudaError || status.code() == Code::InvalidUsage) {
      CFX_WARN(kInit, "CUDA IPC unavailable, device collectives stage through host memory: %s", status.message().c_str());
      return Status::ok();
    }
    return status;
  }
  CFX_INFO(kInit, "CUDA IPC workspace on device %d: 2 x %zu bytes per rank", device, ipc_->slotBytes());
  if (ipc_->gpuSharers() > 0 && setup_.rank == 0) {
    // Kernels of different processes on one GPU run concurrently only under MPS; otherwise each one
    // waits for a time slice (about 4.5 ms per all-reduce measured on an H200).
    CFX_WARN(kInit, "%d ranks share one GPU: start the MPS daemon (nvidia-cuda-mps-control -d) so that their "
             "kernels run concurrently; without it each collective waits for GPU time slices (milliseconds)",
             ipc_->gpuSharers() + 1);
  }
  return Status::ok();
}

Status DeviceCalls::orderAfterPreviousIpc(cudaStream_t stream) {
  // The kernels' slot reuse needs each rank's launches one after another: when the caller switches
  // streams, the new stream first waits for everything queued on the previous one.
  if (ipcStreamKnown_ && stream != static_cast<cudaStream_t>(ipcStream_)) {
    if (!ipcSwitch_.valid()) {
      if (Status s = CudaEvent::create(ipcSwitch_); !s) return s;
    }
    if (Status s = ipcSwitch_.record(static_cast<cudaStream_t>(ipcStream_), "cudaEventRecord on the previous stream"); !s) {
      return s;
    }
    if (cudaError_t e = cudaStreamWaitEvent(stream, ipcSwitch_.get(), 0); e != cudaSuccess) return cudaFailure("cudaStreamWaitEvent", e);
  }
  ipcStream_ = stream;
  ipcStreamKnown_ = true;
  return Status::ok();
}

Algo DeviceCalls::ipcKernel(const CallArgs& a, size_t bytes) {
  const IpcShape shape{setup_.nranks, ipc_->oneGpu(), oneShotBytes_};
  const bool explain = setup_.rank == 0 && log::enabled(log::Level::Info, log::kTuning) && explained_.size() < 4096 &&
                       explained_.emplace(a.coll, bytes).second;
  const std::optional<Selection> s = setup_.selector->selectIpc(a.coll, bytes, shape, explain);
  if (!s) return a.coll == Collective::AllReduce ? Algo::IpcTwoShot : Algo::Ipc;  // run() asked first: not reached
  if (explain) {
    CFX_INFO(kTuning, "%s of %zu bytes on %d ranks (device buffers): %s, because %s",
             std::string(collectiveName(a.coll)).c_str(), bytes, setup_.nranks, std::string(algoName(s->algo)).c_str(),
             s->reason.c_str());
  }
  return s->algo;
}

Status DeviceCalls::runIpc(const CallArgs& a) {
  const size_t elt = dataTypeSize(a.dtype);
  cudaStream_t stream = streamOf(a.stream);
  if (Status s = orderAfterPreviousIpc(stream); !s) return s;
  const bool allReduce = a.coll == Collective::AllReduce;
  const cuda::IpcCollective kind = ipcKind(a.coll);
  const uint64_t factor = allReduce ? 1 : static_cast<uint64_t>(cuda::ipcSlotFactor(kind, setup_.nranks));
  const uint64_t maxCount = ipc_->slotBytes() / (elt * factor);
  cuda::IpcAllReduceCall c;
  c.type = a.dtype;
  c.op = a.op == RedOp::Avg ? RedOp::Sum : a.op;
  if (a.op == RedOp::PreMulSum) {  // the kernels scale this rank's input as they publish it
    c.premul = true;
    c.scalarBits = a.scalarBits;
    if (a.scalarPtr != nullptr) {
      if (placeOf(a.scalarPtr).space == MemSpace::Cuda) {
        c.scalarDevice = a.scalarPtr;
      } else if (!readSmallValue(&c.scalarBits, a.scalarPtr, elt)) {
        return Status(Code::CudaError, "op: cannot read the PreMulSum scalar");
      }
    }
  }
  c.rank = setup_.rank;
  c.nranks = setup_.nranks;
  c.root = a.root;
  c.slotBytes = ipc_->slotBytes();
  c.error = ipc_->errorWordDevice();
  c.timeoutNs = static_cast<uint64_t>(setup_.timeoutMs) * 1000000ull;
  c.maxBlocks = ipc_->maxBlocks();
  c.sendStride = a.count;  // rank blocks are a.count elements apart where there are several
  c.recvStride = a.count;
  for (uint64_t done = 0; done < a.count;) {
    const uint64_t n = std::min<uint64_t>(maxCount, a.count - done);
    c.send = a.send == nullptr ? nullptr : static_cast<const std::byte*>(a.send) + done * elt;
    c.recv = a.recv == nullptr ? nullptr : static_cast<std::byte*>(a.recv) + done * elt;
    c.count = n;
    c.gen = ++gen_;
    const Algo kernel = ipcKernel(a, n * elt);
    cudaError_t e;
    if (kernel == Algo::IpcOneShot) e = cuda::launchIpcOneShot(ipc_->peers(), c, stream);
    else if (kernel == Algo::IpcTwoShot) e = cuda::launchIpcTwoShot(ipc_->peers(), c, stream);
    else e = cuda::launchIpcCollective(kind, ipc_->peers(), c, stream);
    if (e != cudaSuccess) return cudaFailure(std::string(collectiveName(a.coll)) + " (CUDA IPC) launch", e);
    done += n;
  }
  const bool averages = a.op == RedOp::Avg && (allReduce || a.coll == Collective::ReduceScatter ||
                                               (a.coll == Collective::Reduce && a.root == setup_.rank));
  if (averages) {
    if (cudaError_t e = cuda::launchDivide(a.dtype, a.recv, a.count, setup_.nranks, stream); e != cudaSuccess) {
      return cudaFailure("average division launch", e);
    }
  }
  return Status::ok();
}

}  // namespace conflux
