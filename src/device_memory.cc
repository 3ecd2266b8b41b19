// placeOf: cudaPointerGetAttributes, skipped for good once CUDA proved unusable in this process.
#include "src/device_memory.h"

#include <atomic>
#include <cstring>

#if CONFLUX_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace conflux {

#if CONFLUX_HAVE_CUDA
namespace {
// -1 not yet known, 0 no usable CUDA, 1 usable. Asked at the first collective, not at load time; with
// no driver or no device the runtime answers at once, and the answer is kept.
std::atomic<int> gUsable{-1};

bool probe() {
  int v = gUsable.load(std::memory_order_acquire);
  if (v < 0) {
    int n = 0;
    v = (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) ? 1 : 0;
    if (v == 0) cudaGetLastError();  // leave no pending error for the application's next CUDA call
    gUsable.store(v, std::memory_order_release);
  }
  return v == 1;
}
}  // namespace

bool cudaUsable() { return probe(); }

BufferPlace placeOf(const void* ptr) {
  if (ptr == nullptr || !probe()) return {};
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  if (attr.type == cudaMemoryTypeDevice) return {MemSpace::Cuda, attr.device};
  return {};
}

bool readSmallValue(void* dst, const void* src, size_t bytes) {
  if (placeOf(src).space != MemSpace::Cuda) {
    std::memcpy(dst, src, bytes);
    return true;
  }
  // Synchronous, after the work already queued on the legacy default stream: the host path runs the
  // collective right away, so the value must be final now.
  if (cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}
#else
bool cudaUsable() { return false; }
BufferPlace placeOf(const void*) { return {}; }
bool readSmallValue(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return true;
}
#endif

}  // namespace conflux
