// Synchronisation helpers shared by the CUDA-IPC kernels (ipc_allreduce.cu, ipc_collectives.cu).
// Include from .cu files only.
//
// Ordering. Writers: __syncthreads, then one thread issues a system-scope fence and stores the flags with
// release semantics. Readers: one thread per peer loads with acquire semantics, then __syncthreads and a
// system-scope acquire fence by every thread before reading peers' memory. Waits are bounded by
// timeoutNs: a timed-out wait records the peer in the host-mapped error word and stops waiting.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/ipc_allreduce.h"

namespace conflux::cuda::ipc {

constexpr int kThreads = 512;

__device__ __forceinline__ void storeRelease(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t loadAcquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// [lo, hi) of part i of n elements cut into `parts` pieces whose boundaries are multiples of `align`.
__device__ __forceinline__ void partOf(size_t n, int parts, int i, size_t align, size_t& lo, size_t& hi) {
  const size_t units = (n + align - 1) / align;
  const size_t per = (units + parts - 1) / parts;
  lo = min(n, static_cast<size_t>(i) * per * align);
  hi = min(n, static_cast<size_t>(i + 1) * per * align);
}

/// Block-wide: publish `value` to every peer for this block, then wait until every peer published at
/// least `value` for it. Returns false (all threads) when a wait timed out or another block saw one.
__device__ inline bool exchangeFlags(const IpcPeers& peers, const IpcAllReduceCall& c, uint64_t value) {
  __shared__ int failed;
  const int b = blockIdx.x;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    for (int p = 0; p < c.nranks; ++p) {
      if (p != c.rank) storeRelease(&peers.flags[p][c.rank * kIpcMaxBlocks + b], value);
    }
  }
  const int p = static_cast<int>(threadIdx.x);
  if (p < c.nranks && p != c.rank) {
    const uint64_t* flag = &peers.flags[c.rank][p * kIpcMaxBlocks + b];
    const volatile uint32_t* error = c.error;
    uint64_t start = 0;
    for (uint32_t spins = 0; loadAcquire(flag) < value; ++spins) {
      if ((spins & 1023u) != 1023u) continue;
      const uint64_t now = globalTimerNs();
      if (start == 0) start = now;
      if (*error != 0) {  // another block or rank gave up: the call is failed anyway
        failed = 1;
        break;
      }
      if (c.timeoutNs != 0 && now - start > c.timeoutNs) {
        atomicCAS(c.error, 0u, static_cast<uint32_t>(p + 1));
        __threadfence_system();
        failed = 1;
        break;
      }
    }
  }
  __syncthreads();
  asm volatile("fence.acq_rel.sys;" ::: "memory");
  return failed == 0;
}

template <class T>
__device__ __forceinline__ T* slotOf(const IpcPeers& peers, const IpcAllReduceCall& c, int r) {
  return reinterpret_cast<T*>(peers.data[r] + (c.gen & 1) * c.slotBytes);
}

}  // namespace conflux::cuda::ipc
