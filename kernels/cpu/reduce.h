// CPU reduction and copy kernels: every datatype x op, multi-source, vectorised with runtime ISA dispatch.
#pragma once

#include <cstddef>

#include "core/types.h"

namespace conflux::cpu {

/// dst[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) for i < count, nsrc >= 1 (nsrc == 1 copies).
/// dst may alias any source exactly (same address) but must not partially overlap one.
/// float16/bfloat16 accumulate all sources in float32 and round once to nearest even.
/// Avg reduces as Sum (the caller divides once at the end with divideInPlace).
/// Buffers need no particular alignment. Element semantics (integer wrap-around, IEEE 754-2019
/// max/min with NaN propagation and -0 < +0, rounding of the 16-bit floats) are documented in
/// kernels/reduce_ops.h and kernels/half.h; every instruction-set path gives the same bits.
/// Out-of-place results of >= 1 MiB are written with non-temporal stores (not left in cache).
using ReduceFn = void (*)(void* dst, const void* const* srcs, int nsrc, size_t count);

/// The kernel for (type, op); never null for valid enums.
ReduceFn reduceFunction(DataType type, RedOp op);

/// data[i] = data[i] / divisor (integers: truncating division of the stored value; halves via float32).
/// divisor >= 1 (the number of contributions); other values leave data unchanged.
void divideInPlace(DataType type, void* data, size_t count, int divisor);

/// memcpy tuned for large buffers (non-temporal stores above a threshold). Buffers must not overlap.
void copy(void* dst, const void* src, size_t bytes);

/// memcpy with non-temporal stores at any size (from 256 bytes): for destinations the caches cannot
/// hold anyway, e.g. the pieces of a message much larger than the caches. Buffers must not overlap.
void copyStreaming(void* dst, const void* src, size_t bytes);

/// Name of the instruction set the dispatcher picked ("avx512", "avx2", "scalar"), for logs and benchmarks.
/// CONFLUX_CPU_ISA=scalar|avx2|avx512 narrows the choice; kernels/cpu/isa.h has the full control.
const char* isaName();

}  // namespace conflux::cpu
