// CPU reduction and copy kernels: every datatype x op, multi-source, vectorised with runtime ISA dispatch.
#pragma once

#include <cstddef>
#include <cstdint>

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

/// The kernel for (type, op); never null for valid enums where opAppliesTo(op, type) (null for a bitwise op
/// on a floating type). Avg and PreMulSum get the Sum kernel.
ReduceFn reduceFunction(DataType type, RedOp op);

/// The PreMulSum kernel: dst[i] = sum over k of x_k[i], where x_k = srcs[k], multiplied by *scalar first
/// for each k whose bit is set in `scaledMask` (bit k; sources past 63 are never scaled). *scalar is one
/// value of the element type (any alignment). nsrc >= 1; nsrc == 1 with mask 1 is a scaled copy. Integers
/// wrap; floats multiply and add in the accumulator type (float32 for the 16-bit floats, rounded once at
/// the end). dst may alias any source exactly. This is how a rank's own input enters a PreMulSum: scaled
/// where it is first read, so the multiplication costs no pass of its own.
using PremulFn = void (*)(void* dst, const void* const* srcs, int nsrc, size_t count, uint64_t scaledMask,
                          const void* scalar);

/// The PreMulSum kernel of `type`; never null for a valid type.
PremulFn premulSumFunction(DataType type);

/// data[i] = data[i] / divisor (integers: truncating division of the stored value; halves via float32).
/// divisor >= 1 (the number of contributions); other values leave data unchanged.
void divideInPlace(DataType type, void* data, size_t count, int divisor);

/// dsts[k][i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) for every k < ndst and i < count, reading the
/// sources once however many destinations there are, and writing the destinations with non-temporal
/// stores: for results that several ranks need and no one reads soon (a direct all-reduce's slice goes
/// to this rank's and every peer's receive buffer). The stores are non-temporal where the active path
/// vectorises (type, op), nsrc >= 2, ndst <= kMaxFanout and every destination has the same address
/// modulo 64 bytes (a whole number of elements); otherwise dsts[0] is reduced with reduceFunction's
/// kernel and the others are streamed from it. The bits are the same either way. Avg reduces as Sum;
/// PreMulSum is not covered (use premulSumFunction). A destination may equal a source exactly (every
/// element's sources are read before it is stored anywhere) but must not overlap one partially, and
/// destinations must not overlap each other. nsrc >= 1, ndst >= 1.
void reduceStreamingTo(DataType type, RedOp op, void* const* dsts, int ndst, const void* const* srcs, int nsrc,
                       size_t count);

/// The most destinations reduceStreamingTo writes in one pass (with more, every destination after the
/// first is streamed from it).
inline constexpr int kMaxFanout = 16;

/// memcpy tuned for large buffers (non-temporal stores above a threshold). Buffers must not overlap.
void copy(void* dst, const void* src, size_t bytes);

/// memcpy with non-temporal stores at any size (from 256 bytes): for destinations the caches cannot
/// hold anyway, e.g. the pieces of a message much larger than the caches. Buffers must not overlap.
void copyStreaming(void* dst, const void* src, size_t bytes);

/// Name of the instruction set the dispatcher picked ("avx512", "avx2", "scalar"), for logs and benchmarks.
/// CONFLUX_CPU_ISA=scalar|avx2|avx512 narrows the choice; kernels/cpu/isa.h has the full control.
const char* isaName();

}  // namespace conflux::cpu
