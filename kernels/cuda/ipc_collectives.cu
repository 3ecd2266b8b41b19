// CUDA-IPC all-gather, reduce-scatter, all-to-all, broadcast and reduce (ipc_collectives.h).
//
// Schedule of one launch (call gen, slot = workspace half gen & 1, B blocks, block b handles part b
// [lo, hi) of the piece's `count` elements; pc = count; for PreMulSum the publishing copies of reduce and
// reduce-scatter multiply by the rank's scalar, ipc_input.cuh):
//   publish:   all-gather, broadcast (root only), reduce:  slot[j] = send[j]
//              reduce-scatter, all-to-all:                  slot[s pc + j] = send[s sendStride + j], every s
//   flags:     2 gen, exchanged per block with every peer (ipc_sync.cuh)
//   read:      all-gather:      recv[s recvStride + j] = slot_s[j]                   every s
//              reduce-scatter:  recv[j] = reduce over s of slot_s[me pc + j]          (rank order)
//              all-to-all:      recv[s recvStride + j] = slot_s[me pc + j]           every s
//              broadcast:       recv[j] = slot_root[j] (the root copies send if recv differs)
//              reduce (root):   recv[j] = reduce over s of slot_s[j]
// In place works for all-gather (send is recv's own block) and reduce-scatter (recv is send's own
// block): each block reads its part of send before it writes the same part of recv, and touches no
// other part. Slot reuse and flag values follow ipc_allreduce.cu.
#include "kernels/cuda/ipc_collectives.h"

#include "kernels/cuda/ipc_input.cuh"
#include "kernels/cuda/ipc_sync.cuh"
#include "kernels/cuda/reduce_device.cuh"

namespace conflux::cuda {
namespace {

using namespace ipc;

template <class T>
__device__ __forceinline__ void copyPart(T* dst, const T* src, size_t len) {
  reduceRange<T, RedOp::Sum>(dst, static_cast<T*>(nullptr), &src, 1, len, threadIdx.x, blockDim.x);
}

template <class T, RedOp kOp, IpcCollective kKind>
__global__ void __launch_bounds__(kThreads) collectiveKernel(IpcPeers peers, IpcAllReduceCall c) {
  constexpr size_t kVec = sizeof(T) >= 16 ? 1 : 16 / sizeof(T);
  size_t lo, hi;
  partOf(c.count, gridDim.x, blockIdx.x, kVec, lo, hi);
  const size_t len = hi - lo, pc = c.count;
  const int n = c.nranks, me = c.rank;
  const T* send = static_cast<const T*>(c.send);
  T* recv = static_cast<T*>(c.recv);
  T* mine = slotOf<T>(peers, c, me);

  if constexpr (kKind == IpcCollective::ReduceScatter) {
    for (int s = 0; s < n; ++s) publishInput<T>(mine + s * pc + lo, send + s * c.sendStride + lo, len, c);
  } else if constexpr (kKind == IpcCollective::AllToAll) {
    for (int s = 0; s < n; ++s) copyPart(mine + s * pc + lo, send + s * c.sendStride + lo, len);
  } else if constexpr (kKind == IpcCollective::Reduce) {
    publishInput<T>(mine + lo, send + lo, len, c);
  } else if (kKind != IpcCollective::Broadcast || me == c.root) {
    copyPart(mine + lo, send + lo, len);
  }
  if (!exchangeFlags(peers, c, 2 * c.gen)) return;

  if constexpr (kKind == IpcCollective::AllGather) {
    for (int s = 0; s < n; ++s) copyPart(recv + s * c.recvStride + lo, slotOf<T>(peers, c, s) + lo, len);
  } else if constexpr (kKind == IpcCollective::AllToAll) {
    for (int s = 0; s < n; ++s) copyPart(recv + s * c.recvStride + lo, slotOf<T>(peers, c, s) + me * pc + lo, len);
  } else if constexpr (kKind == IpcCollective::Broadcast) {
    if (me != c.root) copyPart(recv + lo, slotOf<T>(peers, c, c.root) + lo, len);
    else if (recv != send) copyPart(recv + lo, send + lo, len);
  } else {
    if (kKind == IpcCollective::Reduce && me != c.root) return;
    const size_t at = kKind == IpcCollective::ReduceScatter ? me * pc : 0;
    const T* srcs[kIpcMaxRanks];
    for (int s = 0; s < n; ++s) srcs[s] = slotOf<T>(peers, c, s) + at + lo;
    reduceRange<T, kOp>(recv + lo, static_cast<T*>(nullptr), srcs, n, len, threadIdx.x, blockDim.x);
  }
}

/// Data movement needs only the element size: one unsigned type per size keeps the kernel count down.
template <IpcCollective kKind>
void launchCopy(size_t elt, int blocks, const IpcPeers& peers, const IpcAllReduceCall& c, cudaStream_t stream) {
  switch (elt) {
    case 1: collectiveKernel<uint8_t, RedOp::Sum, kKind><<<blocks, kThreads, 0, stream>>>(peers, c); break;
    case 2: collectiveKernel<uint16_t, RedOp::Sum, kKind><<<blocks, kThreads, 0, stream>>>(peers, c); break;
    case 4: collectiveKernel<uint32_t, RedOp::Sum, kKind><<<blocks, kThreads, 0, stream>>>(peers, c); break;
    default: collectiveKernel<uint64_t, RedOp::Sum, kKind><<<blocks, kThreads, 0, stream>>>(peers, c); break;
  }
}

template <IpcCollective kKind>
bool launchReducing(int blocks, const IpcPeers& peers, const IpcAllReduceCall& c, cudaStream_t stream) {
  return dispatchTypeOp(c.type, c.op, [&]<class T, RedOp kOp>() {
    collectiveKernel<T, kOp, kKind><<<blocks, kThreads, 0, stream>>>(peers, c);
  });
}

}  // namespace

cudaError_t launchIpcCollective(IpcCollective kind, const IpcPeers& peers, const IpcAllReduceCall& call,
                                cudaStream_t stream) {
  const size_t elt = dataTypeSize(call.type);
  if (call.nranks < 1 || call.nranks > kIpcMaxRanks || call.rank < 0 || call.rank >= call.nranks ||
      call.root < 0 || call.root >= call.nranks || call.op == RedOp::Avg || elt == 0 ||
      call.count * elt * ipcSlotFactor(kind, call.nranks) > call.slotBytes) {
    return cudaErrorInvalidValue;
  }
  if (call.count == 0) return cudaSuccess;
  const int blocks = ipcBlocks(call.count * elt, call.maxBlocks);
  bool known = true;
  switch (kind) {
    case IpcCollective::AllGather: launchCopy<IpcCollective::AllGather>(elt, blocks, peers, call, stream); break;
    case IpcCollective::AllToAll: launchCopy<IpcCollective::AllToAll>(elt, blocks, peers, call, stream); break;
    case IpcCollective::Broadcast: launchCopy<IpcCollective::Broadcast>(elt, blocks, peers, call, stream); break;
    case IpcCollective::ReduceScatter: known = launchReducing<IpcCollective::ReduceScatter>(blocks, peers, call, stream); break;
    case IpcCollective::Reduce: known = launchReducing<IpcCollective::Reduce>(blocks, peers, call, stream); break;
  }
  if (!known) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace conflux::cuda
