// CUDA reduce kernels: launchReduce / launchDivide over reduceRange / divideRange (reduce_device.cuh).
//
// Launch configuration: 256-thread blocks, at most 4 per SM (__launch_bounds__(256, 4) caps registers at
// 64 so all of them are resident: one wave, no tail of late blocks), fewer when the range is small (one
// worker per kUnroll vectors). Every kernel is grid-stride, so any grid is correct; the grid only sets
// speed. One instantiation per (storage type, op): 10 x 4 reduce kernels plus 6 x 3 bitwise ones for the
// integer types (Avg and PreMulSum run as Sum) and 10 divide kernels.
#include <atomic>
#include <cstdint>

#include "kernels/cuda/reduce.h"
#include "kernels/cuda/reduce_device.cuh"

namespace conflux::cuda {
namespace {

constexpr int kMinBlocksPerSm = 4;
constexpr int kMaxDevices = 64;

/// Everything a reduce kernel needs, passed by value (the source array travels inside the launch).
struct ReduceParams {
  void* dst;
  void* dst2;
  const void* srcs[kMaxReduceSources];
  int nsrc;
  size_t count;
};

template <class T, RedOp kOp>
__global__ void __launch_bounds__(kReduceBlockThreads, kMinBlocksPerSm) reduceKernel(ReduceParams p) {
  // Source pointers in shared memory: reduceRange indexes them with a runtime k.
  __shared__ const T* srcs[kMaxReduceSources];
  if (threadIdx.x == 0) {
#pragma unroll
    for (int k = 0; k < kMaxReduceSources; ++k) srcs[k] = static_cast<const T*>(p.srcs[k]);
  }
  __syncthreads();
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t nthreads = static_cast<size_t>(gridDim.x) * blockDim.x;
  reduceRange<T, kOp>(static_cast<T*>(p.dst), static_cast<T*>(p.dst2), srcs, p.nsrc, p.count, tid, nthreads);
}

template <class T>
__global__ void __launch_bounds__(kReduceBlockThreads, kMinBlocksPerSm)
    divideKernel(T* data, size_t count, int divisor) {
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  divideRange<T>(data, count, divisor, tid, static_cast<size_t>(gridDim.x) * blockDim.x);
}

template <class T>
__global__ void __launch_bounds__(kReduceBlockThreads, kMinBlocksPerSm)
    scaleKernel(T* dst, const T* src, size_t count, uint64_t bits, const T* scalarDevice) {
  T s;
  if (scalarDevice != nullptr) {
    s = *scalarDevice;
  } else {
    memcpy(&s, &bits, sizeof(T));
  }
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  scaleRange<T>(dst, src, count, Accumulator<T>::widen(s), tid, static_cast<size_t>(gridDim.x) * blockDim.x);
}

/// Blocks that cover `count` elements of `elemSize` bytes at one worker per `perWorker` vectors,
/// clamped to [1, limit].
int blocksFor(size_t count, size_t elemSize, size_t perWorker, int limit) {
  const size_t bytesPerWorker = detail::kVecBytes * perWorker;
  const size_t workers = (count * elemSize + bytesPerWorker - 1) / bytesPerWorker;
  const size_t blocks = (workers + kReduceBlockThreads - 1) / kReduceBlockThreads;
  if (blocks < 1) return 1;
  return blocks < static_cast<size_t>(limit) ? static_cast<int>(blocks) : limit;
}

bool alignedTo(const void* p, size_t align) { return reinterpret_cast<uintptr_t>(p) % align == 0; }

/// Launches an element-wise kernel (divide, scale: one vector per worker) for the storage type of `type`, on the grid
/// launchReduce would use: launch.template operator()<T>(blocks) makes the launch and returns its error.
/// The op is irrelevant here: dispatch on Sum only, so these kernels are instantiated once per type.
template <class Launch>
cudaError_t launchPerElement(DataType type, size_t count, Launch&& launch) {
  int limit = 0;
  cudaError_t err = reduceGridLimit(&limit);
  if (err != cudaSuccess) return err;
  err = cudaErrorInvalidValue;
  dispatchTypeOp(type, RedOp::Sum, [&]<class T, RedOp>() {
    err = launch.template operator()<T>(blocksFor(count, sizeof(T), 1, limit));
  });
  return err;
}

/// Argument checks shared by launchReduce and launchReduceWithGrid (count > 0).
bool validReduceArgs(DataType type, RedOp op, const void* dst, const void* dst2, const void* const* srcs,
                     int nsrc) {
  if (!isValidDataType(static_cast<int>(type)) || !isKernelRedOp(static_cast<int>(op))) return false;
  if (nsrc < 1 || nsrc > kMaxReduceSources || srcs == nullptr || dst == nullptr) return false;
  const size_t es = dataTypeSize(type);
  if (!alignedTo(dst, es) || !alignedTo(dst2, es)) return false;
  for (int k = 0; k < nsrc; ++k)
    if (srcs[k] == nullptr || !alignedTo(srcs[k], es)) return false;
  return true;
}

cudaError_t launchReduceChecked(DataType type, RedOp op, void* dst, void* dst2, const void* const* srcs,
                                int nsrc, size_t count, int blocks, int threads, cudaStream_t stream) {
  ReduceParams p{};
  p.dst = dst;
  p.dst2 = dst2;
  for (int k = 0; k < nsrc; ++k) p.srcs[k] = srcs[k];
  p.nsrc = nsrc;
  p.count = count;
  cudaError_t err = cudaErrorInvalidValue;
  dispatchTypeOp(type, op, [&]<class T, RedOp kOp>() {
    if (blocks == 0) {
      int limit = 0;
      err = reduceGridLimit(&limit);
      if (err != cudaSuccess) return;
      blocks = blocksFor(count, sizeof(T), detail::kUnroll<T>, limit);
    }
    void* args[] = {&p};
    err = cudaLaunchKernel(reinterpret_cast<const void*>(&reduceKernel<T, kOp>), dim3(blocks), dim3(threads),
                           args, 0, stream);
  });
  return err;
}

}  // namespace

cudaError_t reduceGridLimit(int* blocks) {
  static std::atomic<int> cache[kMaxDevices];  // 0 = not queried yet
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (dev >= 0 && dev < kMaxDevices) {
    const int cached = cache[dev].load(std::memory_order_relaxed);
    if (cached > 0) {
      *blocks = cached;
      return cudaSuccess;
    }
  }
  int sms = 0;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (err != cudaSuccess) return err;
  const int limit = (sms > 0 ? sms : 1) * kMinBlocksPerSm;
  if (dev >= 0 && dev < kMaxDevices) cache[dev].store(limit, std::memory_order_relaxed);
  *blocks = limit;
  return cudaSuccess;
}

cudaError_t launchReduce(DataType type, RedOp op, void* dst, void* dst2, const void* const* srcs, int nsrc,
                         size_t count, cudaStream_t stream) {
  if (!isValidDataType(static_cast<int>(type)) || !isKernelRedOp(static_cast<int>(op))) return cudaErrorInvalidValue;
  if (nsrc < 1 || nsrc > kMaxReduceSources) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (!validReduceArgs(type, op, dst, dst2, srcs, nsrc)) return cudaErrorInvalidValue;
  return launchReduceChecked(type, op, dst, dst2, srcs, nsrc, count, 0, kReduceBlockThreads, stream);
}

cudaError_t launchReduceWithGrid(DataType type, RedOp op, void* dst, void* dst2, const void* const* srcs,
                                 int nsrc, size_t count, int blocks, int threadsPerBlock, cudaStream_t stream) {
  if (!isValidDataType(static_cast<int>(type)) || !isKernelRedOp(static_cast<int>(op))) return cudaErrorInvalidValue;
  if (nsrc < 1 || nsrc > kMaxReduceSources) return cudaErrorInvalidValue;
  if (blocks < 1 || threadsPerBlock < 1 || threadsPerBlock > kReduceBlockThreads) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (!validReduceArgs(type, op, dst, dst2, srcs, nsrc)) return cudaErrorInvalidValue;
  return launchReduceChecked(type, op, dst, dst2, srcs, nsrc, count, blocks, threadsPerBlock, stream);
}

cudaError_t launchScale(DataType type, void* dst, const void* src, size_t count, uint64_t scalarBits,
                        const void* scalarDevice, cudaStream_t stream) {
  if (!isValidDataType(static_cast<int>(type))) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  const size_t es = dataTypeSize(type);
  if (dst == nullptr || src == nullptr || !alignedTo(dst, es) || !alignedTo(src, es) || !alignedTo(scalarDevice, es)) {
    return cudaErrorInvalidValue;
  }
  return launchPerElement(type, count, [&]<class T>(int blocks) {
    T* d = static_cast<T*>(dst);
    const T* in = static_cast<const T*>(src);
    const T* sd = static_cast<const T*>(scalarDevice);
    void* args[] = {&d, &in, &count, &scalarBits, &sd};
    return cudaLaunchKernel(reinterpret_cast<const void*>(&scaleKernel<T>), dim3(blocks), dim3(kReduceBlockThreads),
                            args, 0, stream);
  });
}

cudaError_t launchDivide(DataType type, void* data, size_t count, int divisor, cudaStream_t stream) {
  if (!isValidDataType(static_cast<int>(type))) return cudaErrorInvalidValue;
  if (divisor <= 1 || count == 0) return cudaSuccess;
  if (data == nullptr || !alignedTo(data, dataTypeSize(type))) return cudaErrorInvalidValue;
  return launchPerElement(type, count, [&]<class T>(int blocks) {
    T* typed = static_cast<T*>(data);
    void* args[] = {&typed, &count, &divisor};
    return cudaLaunchKernel(reinterpret_cast<const void*>(&divideKernel<T>), dim3(blocks), dim3(kReduceBlockThreads),
                            args, 0, stream);
  });
}

}  // namespace conflux::cuda
