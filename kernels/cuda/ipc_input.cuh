// How the CUDA-IPC kernels publish this rank's input into its slot: a copy, or for PreMulSum a copy
// multiplied by the rank's scalar (the multiplication rides on the copy the kernels make anyway).
// Include from .cu files only.
#pragma once

#include <cstddef>
#include <cstring>

#include "kernels/cuda/ipc_allreduce.h"
#include "kernels/cuda/reduce_device.cuh"

namespace conflux::cuda::ipc {

/// dst[0, len) = src[0, len), scaled by the call's PreMulSum scalar when c.premul; this thread's share
/// of the block.
template <class T>
__device__ __forceinline__ void publishInput(T* dst, const T* src, size_t len, const IpcAllReduceCall& c) {
  if (!c.premul) {
    reduceRange<T, RedOp::Sum>(dst, static_cast<T*>(nullptr), &src, 1, len, threadIdx.x, blockDim.x);
    return;
  }
  T s;
  if (c.scalarDevice != nullptr) {
    s = *static_cast<const T*>(c.scalarDevice);
  } else {
    memcpy(&s, &c.scalarBits, sizeof(T));
  }
  scaleRange<T>(dst, src, len, Accumulator<T>::widen(s), threadIdx.x, blockDim.x);
}

}  // namespace conflux::cuda::ipc
