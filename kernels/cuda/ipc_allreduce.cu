// CUDA-IPC all-reduce kernels (ipc_allreduce.h).
//
// Schedule. The message is cut into B block parts (B = ipcBlocks(bytes, cap), the same on every rank), each
// aligned to 16 bytes; block b of every rank works only on part b, and synchronises only with block b of
// the other ranks, through its own flag words. So no block ever waits for another block of its own grid,
// and a grid needs no co-residency.
//
//   one-shot, call gen:  copy my part b of send -> my slot          (slot = workspace half gen & 1;
//                                       PreMulSum: the copy multiplies by my scalar, ipc_input.cuh)
//                        flag[me][b] := 2 gen on every peer; wait flag[p][b] >= 2 gen from every peer
//                        recv part b := reduce over ranks 0..n-1 of slot_p part b (same order everywhere:
//                                       every rank gets the same bits)
//   two-shot, call gen:  the message is cut into n segments, each into B parts;
//                        copy part b of every segment of send -> my slot
//                        flag := 2 gen everywhere; wait for it from every peer
//                        my segment's part b := reduce over ranks of slot_p  -> my slot and recv (fused)
//                        flag := 2 gen + 1 everywhere; wait for it from every peer
//                        recv, segment s part b := slot_s's (s != me)
//
// Flags only grow: every kernel of call gen publishes 2 gen first and 2 gen + 1 second (if at all), so
// kernels of different kinds and grid sizes can follow each other in any order.
//
// Slot reuse. Call gen + 2 writes the slot half that call gen's readers used. Before that, each block of
// call gen + 1 waited for the flag of the same block of every peer for call gen + 1, which that peer set
// only after its whole call-gen grid had finished (stream order), so nobody still reads the half.
//
// Ordering. Writers: __syncthreads, then one thread issues a system-scope fence and stores the flags with
// release semantics. Readers: one thread per peer loads with acquire semantics, then __syncthreads and a
// system-scope acquire fence by every thread before reading peers' memory. Waits are bounded by
// call.timeoutNs: a timed-out wait records the peer in the host-mapped error word and stops waiting.
#include "kernels/cuda/ipc_allreduce.h"

#include "kernels/cuda/ipc_input.cuh"
#include "kernels/cuda/ipc_sync.cuh"
#include "kernels/cuda/reduce_device.cuh"

namespace conflux::cuda {
namespace {

using namespace ipc;

template <class T, RedOp kOp>
__global__ void __launch_bounds__(kThreads) oneShotKernel(IpcPeers peers, IpcAllReduceCall c) {
  constexpr size_t kVec = sizeof(T) >= 16 ? 1 : 16 / sizeof(T);
  size_t lo, hi;
  partOf(c.count, gridDim.x, blockIdx.x, kVec, lo, hi);
  const size_t len = hi - lo;
  T* mine = slotOf<T>(peers, c, c.rank) + lo;
  publishInput<T>(mine, static_cast<const T*>(c.send) + lo, len, c);
  if (!exchangeFlags(peers, c, 2 * c.gen)) return;
  const T* srcs[kIpcMaxRanks];
  for (int r = 0; r < c.nranks; ++r) srcs[r] = slotOf<T>(peers, c, r) + lo;
  reduceRange<T, kOp>(static_cast<T*>(c.recv) + lo, static_cast<T*>(nullptr), srcs, c.nranks, len, threadIdx.x,
                      blockDim.x);
}

template <class T, RedOp kOp>
__global__ void __launch_bounds__(kThreads) twoShotKernel(IpcPeers peers, IpcAllReduceCall c) {
  constexpr size_t kVec = sizeof(T) >= 16 ? 1 : 16 / sizeof(T);
  T* recv = static_cast<T*>(c.recv);
  const T* send = static_cast<const T*>(c.send);
  T* mine = slotOf<T>(peers, c, c.rank);
  // Round 0: part b of every segment of my input into my slot.
  for (int s = 0; s < c.nranks; ++s) {
    size_t segLo, segHi, lo, hi;
    partOf(c.count, c.nranks, s, kVec, segLo, segHi);
    partOf(segHi - segLo, gridDim.x, blockIdx.x, kVec, lo, hi);
    publishInput<T>(mine + segLo + lo, send + segLo + lo, hi - lo, c);
  }
  if (!exchangeFlags(peers, c, 2 * c.gen)) return;
  // Round 1: reduce my segment's part b from every slot, into my slot (for the others) and recv.
  size_t segLo, segHi, lo, hi;
  partOf(c.count, c.nranks, c.rank, kVec, segLo, segHi);
  partOf(segHi - segLo, gridDim.x, blockIdx.x, kVec, lo, hi);
  const T* srcs[kIpcMaxRanks];
  for (int r = 0; r < c.nranks; ++r) srcs[r] = slotOf<T>(peers, c, r) + segLo + lo;
  reduceRange<T, kOp>(mine + segLo + lo, recv + segLo + lo, srcs, c.nranks, hi - lo, threadIdx.x, blockDim.x);
  if (!exchangeFlags(peers, c, 2 * c.gen + 1)) return;
  // Round 2: the other segments' reduced parts from their owners.
  for (int s = 0; s < c.nranks; ++s) {
    if (s == c.rank) continue;
    partOf(c.count, c.nranks, s, kVec, segLo, segHi);
    partOf(segHi - segLo, gridDim.x, blockIdx.x, kVec, lo, hi);
    const T* in = slotOf<T>(peers, c, s) + segLo + lo;
    reduceRange<T, RedOp::Sum>(recv + segLo + lo, static_cast<T*>(nullptr), &in, 1, hi - lo, threadIdx.x,
                               blockDim.x);
  }
}

template <bool kTwoShot>
cudaError_t launch(const IpcPeers& peers, const IpcAllReduceCall& call, cudaStream_t stream) {
  if (call.nranks < 1 || call.nranks > kIpcMaxRanks || call.rank < 0 || call.rank >= call.nranks ||
      call.count * dataTypeSize(call.type) > call.slotBytes) {
    return cudaErrorInvalidValue;
  }
  if (call.count == 0) return cudaSuccess;
  const int blocks = ipcBlocks(call.count * dataTypeSize(call.type), call.maxBlocks);
  const bool known = dispatchTypeOp(call.type, call.op, [&]<class T, RedOp kOp>() {
    if constexpr (kTwoShot) {
      twoShotKernel<T, kOp><<<blocks, kThreads, 0, stream>>>(peers, call);
    } else {
      oneShotKernel<T, kOp><<<blocks, kThreads, 0, stream>>>(peers, call);
    }
  });
  if (!known) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace

int ipcBlocks(size_t bytes, int maxBlocks) {
  constexpr size_t kBytesPerBlock = 32 << 10;
  const size_t cap = static_cast<size_t>(maxBlocks < 1 ? 1 : (maxBlocks > kIpcMaxBlocks ? kIpcMaxBlocks : maxBlocks));
  const size_t blocks = (bytes + kBytesPerBlock - 1) / kBytesPerBlock;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

cudaError_t launchIpcOneShot(const IpcPeers& peers, const IpcAllReduceCall& call, cudaStream_t stream) {
  return launch<false>(peers, call, stream);
}

cudaError_t launchIpcTwoShot(const IpcPeers& peers, const IpcAllReduceCall& call, cudaStream_t stream) {
  return launch<true>(peers, call, stream);
}

}  // namespace conflux::cuda
