// The table of kernels one instruction-set path provides; filled by reduce_scalar.cc,
// reduce_avx2.cc and reduce_avx512.cc, read by the dispatcher in reduce.cc. Internal.
#pragma once

#include <cstddef>

#include "core/types.h"
#include "kernels/cpu/reduce.h"

namespace conflux::cpu::detail {

/// Number of distinct reduction kernels per type: Sum, Prod, Max, Min, Band, Bor, Bxor (Avg and
/// PreMulSum use Sum; the bitwise ones exist for integer types only).
inline constexpr int kNumKernelOps = 7;

/// The table column of an op.
constexpr int kernelOpIndex(RedOp op) {
  switch (op) {
    case RedOp::Prod: return 1;
    case RedOp::Max: return 2;
    case RedOp::Min: return 3;
    case RedOp::Band: return 4;
    case RedOp::Bor: return 5;
    case RedOp::Bxor: return 6;
    default: return 0;  // Sum, Avg, PreMulSum
  }
}

/// Results and copies of at least this many bytes use non-temporal stores: they would evict useful
/// cache lines and save the read-for-ownership of the destination.
inline constexpr size_t kStreamThresholdBytes = size_t{1} << 20;

/// Copies with non-temporal stores; buffers must not overlap. Ends with a store fence.
using StreamCopyFn = void (*)(void* dst, const void* src, size_t bytes);

/// reduceStreamingTo's one-pass form: ndst (1..kMaxFanout) destinations, all at the same address modulo
/// 64 bytes and a whole number of elements from a 64-byte boundary, nsrc >= 2, non-temporal stores
/// (fenced before the plain-store tail).
using FanoutFn = void (*)(void* const* dsts, int ndst, const void* const* srcs, int nsrc, size_t count);

/// One ISA path: a kernel for every (type, op), the PreMulSum kernel of every type and a streaming copy;
/// fan-out kernels only where the path vectorises (type, op) (null elsewhere: reduce, then copy).
struct KernelTable {
  ReduceFn reduce[kNumDataTypes][kNumKernelOps] = {};
  FanoutFn fanout[kNumDataTypes][kNumKernelOps] = {};
  PremulFn premul[kNumDataTypes] = {};
  StreamCopyFn streamCopy = nullptr;
};

/// Fills every entry with the portable path (plain x86-64 or any other CPU).
void fillScalarTable(KernelTable& table);
#if defined(CONFLUX_KERNELS_X86)
/// Overwrites the entries this ISA vectorises; call after fillScalarTable. Run only where supported.
void fillAvx2Table(KernelTable& table);
void fillAvx512Table(KernelTable& table);
#endif

}  // namespace conflux::cpu::detail
