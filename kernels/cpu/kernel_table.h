// The table of kernels one instruction-set path provides; filled by reduce_scalar.cc,
// reduce_avx2.cc and reduce_avx512.cc, read by the dispatcher in reduce.cc. Internal.
#pragma once

#include <cstddef>

#include "core/types.h"
#include "kernels/cpu/reduce.h"

namespace conflux::cpu::detail {

/// Number of distinct reduction kernels per type: Sum, Prod, Max, Min (Avg uses Sum).
inline constexpr int kNumKernelOps = 4;

/// Results and copies of at least this many bytes use non-temporal stores: they would evict useful
/// cache lines and save the read-for-ownership of the destination.
inline constexpr size_t kStreamThresholdBytes = size_t{1} << 20;

/// Copies with non-temporal stores; buffers must not overlap. Ends with a store fence.
using StreamCopyFn = void (*)(void* dst, const void* src, size_t bytes);

/// One ISA path: a kernel for every (type, op) and a streaming copy.
struct KernelTable {
  ReduceFn reduce[kNumDataTypes][kNumKernelOps] = {};
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
