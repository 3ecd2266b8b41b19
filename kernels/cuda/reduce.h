// CUDA reduce kernels, host side: multi-source reduce (optionally fused with a copy) and the division of
// Avg, launched on the caller's stream. Plain C++ header (no device code): include it from .cc files.
// Semantics equal kernels/cpu/reduce.h bit for bit (docs/cuda.md), except the payload of a NaN that
// arithmetic produces.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/types.h"

namespace conflux::cuda {

/// Most sources one launchReduce (or reduceRange) call accepts.
inline constexpr int kMaxReduceSources = 8;

/// Threads per block of the reduce and divide kernels.
inline constexpr int kReduceBlockThreads = 256;

/// dst[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) for i < count, and the same values into dst2 when it
/// is not null (fused reduce-and-copy), asynchronously on `stream` (the current device's).
/// nsrc in 1..8 (1 copies); the source pointers are copied into the launch, so `srcs` (a host array)
/// may be reused as soon as the call returns. Avg and PreMulSum reduce as Sum (then call launchDivide, or
/// scale the inputs as they are produced); a bitwise op on a floating type is an invalid value.
/// Buffers are device (or peer-mapped) memory aligned to the element size; dst and dst2 may equal a
/// source but must not overlap one partially. count == 0 launches nothing.
/// Returns cudaErrorInvalidValue for invalid enums, nsrc outside 1..8, null or misaligned pointers,
/// otherwise the launch's error (kernel faults surface later on the stream, as usual).
cudaError_t launchReduce(DataType type, RedOp op, void* dst, void* dst2, const void* const* srcs, int nsrc,
                         size_t count, cudaStream_t stream);

/// launchReduce with an explicit grid: `blocks` blocks of `threadsPerBlock` threads (1..256), for
/// tests of the grid-stride schedule and for tuning. Same contract otherwise.
cudaError_t launchReduceWithGrid(DataType type, RedOp op, void* dst, void* dst2, const void* const* srcs,
                                 int nsrc, size_t count, int blocks, int threadsPerBlock, cudaStream_t stream);

/// data[i] = data[i] / divisor for i < count, on `stream`: the final step of Avg, with the semantics of
/// cpu::divideInPlace (integers: truncating division of the stored value; float16/bfloat16 via float32).
/// divisor <= 1 or count == 0 launches nothing. cudaErrorInvalidValue for an invalid type or a null or
/// misaligned pointer.
cudaError_t launchDivide(DataType type, void* data, size_t count, int divisor, cudaStream_t stream);

/// dst[i] = s * src[i] for i < count on `stream` (a pre-multiplied sum on one rank): s is read by the
/// kernel from `scalarDevice` (device memory) when that is not null, else it is the low bytes of
/// `scalarBits`; the arithmetic of scaleRange (reduce_device.cuh). dst may equal src. count == 0 launches
/// nothing; cudaErrorInvalidValue for an invalid type or a null or misaligned pointer.
cudaError_t launchScale(DataType type, void* dst, const void* src, size_t count, uint64_t scalarBits,
                        const void* scalarDevice, cudaStream_t stream);

/// Blocks launchReduce uses at most on the current device: 4 per SM (one wave of 256-thread blocks,
/// all resident at once). Cached per device after the first query.
cudaError_t reduceGridLimit(int* blocks);

}  // namespace conflux::cuda
