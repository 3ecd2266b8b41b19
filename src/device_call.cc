// DeviceCalls: the CUDA-IPC all-reduce and the staging path (device_call.h).
#include "src/device_call.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "algorithms/plan.h"
#include "core/config.h"
#include "core/log.h"
#include "kernels/cuda/reduce.h"
#include "src/device_call_util.h"
#include "src/device_memory.h"
#include "transport/cuda_ipc/ipc_workspace.h"

namespace conflux {

Status cudaFailure(const std::string& what, cudaError_t e) {
  cudaGetLastError();
  return Status(Code::CudaError, what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

BufferSizes sizesOf(const CallArgs& a, int rank, int nranks) {
  PlanParams p;
  p.coll = a.coll;
  p.nranks = nranks;
  p.rank = rank;
  p.count = a.count;
  p.eltSize = static_cast<uint32_t>(dataTypeSize(a.dtype));
  p.root = a.root;
  return bufferSizes(p);
}

namespace {

constexpr size_t kAlign = 64;

size_t alignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }


/// Where a call's buffers go in the staging area: one region covering both when they overlap (in-place
/// calls keep their layout), else receive first and send after it.
struct StagedLayout {
  size_t sendOffset = 0;
  size_t recvOffset = 0;
  size_t bytes = 0;
};

StagedLayout layoutFor(const void* send, size_t sendBytes, const void* recv, size_t recvBytes) {
  const auto s = reinterpret_cast<uintptr_t>(send);
  const auto r = reinterpret_cast<uintptr_t>(recv);
  const bool overlap = sendBytes > 0 && recvBytes > 0 && s < r + recvBytes && r < s + sendBytes;
  StagedLayout l;
  if (overlap) {
    const uintptr_t base = std::min(s, r);
    l.sendOffset = s - base;
    l.recvOffset = r - base;
    l.bytes = std::max(s + sendBytes, r + recvBytes) - base;
  } else {
    l.recvOffset = 0;
    l.sendOffset = alignUp(recvBytes);
    l.bytes = l.sendOffset + sendBytes;
  }
  return l;
}

}  // namespace

DeviceCalls::DeviceCalls(const Setup& setup, HostRun runHost, HostP2p runP2pHost)
    : setup_(setup), runHost_(std::move(runHost)), runP2pHost_(std::move(runP2pHost)) {
  ipcEnabled_ = config::getBool(config::Var::CUDA_IPC);
  ipcSlotBytes_ = static_cast<size_t>(std::max<int64_t>(1 << 16, config::getInt(config::Var::CUDA_IPC_BYTES)));
  oneShotBytes_ = static_cast<size_t>(std::max<int64_t>(0, config::getInt(config::Var::CUDA_ONESHOT_BYTES)));
  pieceBytes_ = static_cast<size_t>(std::max<int64_t>(4096, config::getInt(config::Var::CUDA_STAGING_PIECE_BYTES)));
}

DeviceCalls::~DeviceCalls() {
  // The copies out of the staging buffer finish before it goes; the events go first, so that the
  // cudaGetLastError below clears what destroying them may leave.
  for (const CudaEvent& e : pending_) (void)e.synchronize("staging copies");
  pending_.clear();
  pieceEvents_.clear();
  ipcSwitch_.reset();
  if (staging_ != nullptr) cudaFreeHost(staging_);
  ipc_.reset();
  cudaGetLastError();
}

DeviceCalls::Places DeviceCalls::placesOf(const CallArgs& a) { return {placeOf(a.send), placeOf(a.recv)}; }

bool DeviceCalls::touchesDevice(const std::vector<P2pOp>& ops) {
  return std::any_of(ops.begin(), ops.end(), [](const P2pOp& op) { return placeOf(op.buf).space == MemSpace::Cuda; });
}

Status DeviceCalls::asyncError() const {
  if (ipc_ == nullptr) return Status::ok();
  const uint32_t word = ipc_->errorWord();
  if (word == 0) return Status::ok();
  return Status(Code::Timeout, "a CUDA-IPC kernel waited more than " + std::to_string(setup_.timeoutMs) +
                                   " ms for rank " + std::to_string(word - 1));
}

Status DeviceCalls::run(const CallArgs& a, const Places& places) {
  if (Status e = asyncError(); !e) return e;
  if (setup_.nranks == 1) return runAlone(a);
  int device = -1;
  // CONFLUX_ALGO may force a host strategy (the selector says no kernel): then the call is staged.
  if (ipcEligible(a, places, device) && setup_.selector->selectIpc(a.coll, 0, IpcShape{}, false)) {
    if (Status s = ensureIpc(device); !s) return s;
    if (ipc_ != nullptr) return runIpc(a);
  }
  return runStaged(a, places);
}

Status DeviceCalls::runAlone(const CallArgs& a) {
  // One rank: every collective copies its input to its output (Avg divides by 1), on the stream; a
  // pre-multiplied sum multiplies as it copies (in place too).
  const BufferSizes sz = sizesOf(a, setup_.rank, setup_.nranks);
  if (a.op == RedOp::PreMulSum && sz.recv > 0) {
    const size_t elt = dataTypeSize(a.dtype);
    uint64_t bits = a.scalarBits;
    const void* onDevice = nullptr;
    if (a.scalarPtr != nullptr) {
      if (placeOf(a.scalarPtr).space == MemSpace::Cuda) onDevice = a.scalarPtr;
      else std::memcpy(&bits, a.scalarPtr, elt);
    }
    if (cudaError_t e = cuda::launchScale(a.dtype, a.recv, a.send, sz.recv / elt, bits, onDevice, streamOf(a.stream));
        e != cudaSuccess) {
      return cudaFailure("pre-multiplied sum (one rank) launch", e);
    }
    return Status::ok();
  }
  if (a.send == a.recv || sz.recv == 0) return Status::ok();
  if (cudaError_t e = cudaMemcpyAsync(a.recv, a.send, sz.recv, cudaMemcpyDefault, streamOf(a.stream)); e != cudaSuccess) {
    return cudaFailure("recvbuff: copy from sendbuff", e);
  }
  return Status::ok();
}

Status DeviceCalls::stagingFor(size_t bytes) {
  for (const CudaEvent& e : pending_) {
    if (Status s = e.synchronize("waiting for the previous call's copies"); !s) {
      pending_.clear();
      return s;
    }
  }
  pending_.clear();
  if (bytes <= stagingBytes_) return Status::ok();
  if (staging_ != nullptr) cudaFreeHost(staging_);
  staging_ = nullptr;
  stagingBytes_ = 0;
  const size_t want = std::max<size_t>(bytes, 1 << 20);
  if (cudaError_t e = cudaHostAlloc(&staging_, want, cudaHostAllocPortable); e != cudaSuccess) {
    staging_ = nullptr;
    return cudaFailure("cudaHostAlloc of " + std::to_string(want) + " staging bytes", e);
  }
  stagingBytes_ = want;
  return Status::ok();
}

Status DeviceCalls::recordPending(cudaStream_t stream) {
  CudaEvent ev;
  if (Status s = CudaEvent::create(ev); !s) return s;
  if (Status s = ev.record(stream, "cudaEventRecord"); !s) return s;
  pending_.push_back(std::move(ev));
  return Status::ok();
}

Status DeviceCalls::runStaged(const CallArgs& a, const Places& places) {
  const BufferSizes sz = sizesOf(a, setup_.rank, setup_.nranks);
  const bool sendDev = sz.send > 0 && places.send.space == MemSpace::Cuda;
  // A reduce leaves non-root receive buffers alone: nothing is copied back there.
  const bool writesRecv = !(a.coll == Collective::Reduce && a.root != setup_.rank);
  const bool recvDev = writesRecv && sz.recv > 0 && places.recv.space == MemSpace::Cuda;
  const StagedLayout l = layoutFor(sendDev ? a.send : nullptr, sendDev ? sz.send : 0,
                                   recvDev ? a.recv : nullptr, recvDev ? sz.recv : 0);
  if (Status s = stagingFor(l.bytes); !s) return s;
  auto* base = static_cast<std::byte*>(staging_);
  Staged st;
  st.args = a;
  st.args.stream = nullptr;
  if (sendDev) st.args.send = base + l.sendOffset;
  if (recvDev) st.args.recv = base + l.recvOffset;
  st.deviceSend = sendDev ? a.send : nullptr;
  st.deviceRecv = recvDev ? a.recv : nullptr;
  if (a.op == RedOp::PreMulSum && a.scalarPtr != nullptr) {
    // A device-resident scalar is read in stream order (a copy to pageable memory returns once done).
    st.args.scalarPtr = nullptr;
    if (placeOf(a.scalarPtr).space == MemSpace::Cuda) {
      if (cudaError_t e = cudaMemcpyAsync(&st.args.scalarBits, a.scalarPtr, dataTypeSize(a.dtype), cudaMemcpyDeviceToHost,
                                          streamOf(a.stream)); e != cudaSuccess) {
        return cudaFailure("op: read the PreMulSum scalar", e);
      }
    } else {
      std::memcpy(&st.args.scalarBits, a.scalarPtr, dataTypeSize(a.dtype));
    }
  }
  // Element-wise collectives whose contiguous pieces are collectives of their own can overlap the
  // copies with the transfer; the others (all-gather, reduce-scatter, all-to-all) move in one piece.
  const bool pieceWise = a.coll == Collective::AllReduce || a.coll == Collective::Reduce ||
                         a.coll == Collective::Broadcast;
  const size_t elt = dataTypeSize(a.dtype);
  const uint64_t pieceCount = pieceWise ? std::max<uint64_t>(1, pieceBytes_ / elt) : a.count;
  return runPieces(st, pieceCount, streamOf(a.stream));
}

/* Staged pipeline, for P pieces of the message (P = 1 unless the collective is element-wise):
 *   stream:  D2H piece 0, event 0, D2H piece 1, event 1, ..., D2H piece P-1, event P-1
 *   host:    wait event i; run the host collective on piece i; enqueue H2D piece i on the stream
 * so the copies to the host of later pieces and the copies back of earlier ones overlap the host
 * collective (the network). Every rank cuts the message alike: the pieces are matching collectives. */
Status DeviceCalls::runPieces(const Staged& st, uint64_t pieceCount, cudaStream_t stream) {
  const CallArgs& h = st.args;
  const size_t elt = dataTypeSize(h.dtype);
  const uint64_t pieces = (h.count + pieceCount - 1) / pieceCount;
  while (pieceEvents_.size() < pieces) {
    CudaEvent ev;
    if (Status s = CudaEvent::create(ev); !s) return s;
    pieceEvents_.push_back(std::move(ev));
  }
  const BufferSizes sz = sizesOf(h, setup_.rank, setup_.nranks);
  const uint64_t pieceSend = pieces == 1 ? sz.send : pieceCount * elt;  // element-wise: send == recv size
  for (uint64_t i = 0; i < pieces; ++i) {
    if (st.deviceSend != nullptr) {
      const uint64_t off = i * pieceSend, bytes = std::min<uint64_t>(pieceSend, sz.send - off);
      if (cudaError_t e = cudaMemcpyAsync(const_cast<void*>(static_cast<const void*>(static_cast<const std::byte*>(h.send) + off)),
                                          static_cast<const std::byte*>(st.deviceSend) + off, bytes,
                                          cudaMemcpyDeviceToHost, stream); e != cudaSuccess) {
        return cudaFailure("sendbuff: copy to host staging", e);
      }
    }
    if (Status s = pieceEvents_[i].record(stream, "cudaEventRecord"); !s) return s;
  }
  for (uint64_t i = 0; i < pieces; ++i) {
    // Piece i's input (and, for i == 0, everything queued before the call) is on the host now.
    if (Status s = pieceEvents_[i].synchronize("stream: wait for the copy to host staging"); !s) return s;
    CallArgs p = h;
    if (pieces > 1) {
      const uint64_t first = i * pieceCount;
      p.count = std::min<uint64_t>(pieceCount, h.count - first);
      // Non-root ranks of broadcast and reduce may pass NULL for the buffer they do not use.
      if (h.send != nullptr) p.send = static_cast<const std::byte*>(h.send) + first * elt;
      if (h.recv != nullptr) p.recv = static_cast<std::byte*>(h.recv) + first * elt;
    }
    if (Status s = runHost_(p); !s) return s;
    if (st.deviceRecv != nullptr) {
      const uint64_t bytes = pieces > 1 ? p.count * elt : sz.recv;
      const uint64_t off = pieces > 1 ? i * pieceCount * elt : 0;
      if (cudaError_t e = cudaMemcpyAsync(static_cast<std::byte*>(st.deviceRecv) + off,
                                          static_cast<const std::byte*>(p.recv), bytes, cudaMemcpyHostToDevice,
                                          stream); e != cudaSuccess) {
        return cudaFailure("recvbuff: copy from host staging", e);
      }
    }
  }
  if (st.deviceRecv != nullptr) return recordPending(stream);
  return Status::ok();
}

Status DeviceCalls::runP2p(const std::vector<P2pOp>& ops) {
  size_t total = 0;
  std::vector<size_t> offset(ops.size(), 0);
  std::vector<bool> onDevice(ops.size(), false);
  for (size_t i = 0; i < ops.size(); ++i) {
    onDevice[i] = ops[i].bytes > 0 && placeOf(ops[i].buf).space == MemSpace::Cuda;
    if (!onDevice[i]) continue;
    offset[i] = total;
    total += alignUp(ops[i].bytes);
  }
  if (Status s = stagingFor(total); !s) return s;
  auto* base = static_cast<std::byte*>(staging_);
  std::vector<P2pOp> host = ops;
  std::vector<void*> streams;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (std::find(streams.begin(), streams.end(), ops[i].stream) == streams.end()) streams.push_back(ops[i].stream);
    if (!onDevice[i]) continue;
    host[i].buf = base + offset[i];
    if (ops[i].isSend) {
      if (cudaError_t e = cudaMemcpyAsync(base + offset[i], ops[i].buf, ops[i].bytes, cudaMemcpyDeviceToHost,
                                          streamOf(ops[i].stream)); e != cudaSuccess) {
        return cudaFailure("sendbuff: copy to host staging", e);
      }
    }
  }
  for (void* s : streams) {
    if (cudaError_t e = cudaStreamSynchronize(streamOf(s)); e != cudaSuccess) return cudaFailure("stream: synchronise", e);
  }
  if (Status s = runP2pHost_(host); !s) return s;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!onDevice[i] || ops[i].isSend) continue;
    if (cudaError_t e = cudaMemcpyAsync(const_cast<void*>(ops[i].buf), base + offset[i], ops[i].bytes,
                                        cudaMemcpyHostToDevice, streamOf(ops[i].stream)); e != cudaSuccess) {
      return cudaFailure("recvbuff: copy from host staging", e);
    }
  }
  for (void* s : streams) {
    if (Status st = recordPending(streamOf(s)); !st) return st;
  }
  return Status::ok();
}

}  // namespace conflux
