// The element loop of the vector paths, generic over a "vector traits" struct V that each ISA file
// defines per element type:
//   using T;                      storage type (float, Float16, int32_t, ...)
//   using R;                      register type holding kWidth accumulators (__m512, __m256i, ...)
//   static constexpr size_t kWidth;
//   static R load(const void*);   kWidth elements, any alignment, widened to the accumulator
//   template <bool kStream> static void store(void*, R);  kWidth elements, narrowed (rounded to
//                                 nearest even for halves); kStream: non-temporal, aligned p
//   static R sum(R, R), prod(R, R), max(R, R), min(R, R)   (only those the ISA vectorises)
// Vector lanes compute exactly what applyOp() in reduce_ops.h computes, so the scalar tail and the
// vector body agree bit for bit. Internal linkage: included by per-ISA translation units only.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/scalar_loop.h"

namespace conflux::cpu::detail {
namespace {

/// True when V has a vector form of kOp.
template <class V, RedOp kOp>
constexpr bool hasVectorOp() {
  using R = typename V::R;
  if constexpr (kOp == RedOp::Sum || kOp == RedOp::Avg) return requires(R a) { V::sum(a, a); };
  else if constexpr (kOp == RedOp::Prod) return requires(R a) { V::prod(a, a); };
  else if constexpr (kOp == RedOp::Max) return requires(R a) { V::max(a, a); };
  else if constexpr (kOp == RedOp::Min) return requires(R a) { V::min(a, a); };
  else if constexpr (kOp == RedOp::Band) return requires(R a) { V::band(a, a); };
  else if constexpr (kOp == RedOp::Bor) return requires(R a) { V::bor(a, a); };
  else if constexpr (kOp == RedOp::Bxor) return requires(R a) { V::bxor(a, a); };
  else return false;
}

template <class V, RedOp kOp>
CFX_INLINE typename V::R vectorOp(typename V::R a, typename V::R b) {
  if constexpr (kOp == RedOp::Sum || kOp == RedOp::Avg) return V::sum(a, b);
  else if constexpr (kOp == RedOp::Prod) return V::prod(a, b);
  else if constexpr (kOp == RedOp::Max) return V::max(a, b);
  else if constexpr (kOp == RedOp::Min) return V::min(a, b);
  else if constexpr (kOp == RedOp::Band) return V::band(a, b);
  else if constexpr (kOp == RedOp::Bor) return V::bor(a, b);
  else return V::bxor(a, b);
}

/// Full registers from element i while at least kWidth remain: 4 registers per source per step,
/// then single registers. Every register is loaded from every source before it is stored, so dst
/// may alias a source exactly. kStream: non-temporal stores (dst + i aligned to 64 bytes).
template <class V, RedOp kOp, bool kStream>
size_t reduceBody(unsigned char* d, const void* const* srcs, int nsrc, size_t i, size_t count) {
  using T = typename V::T;
  using R = typename V::R;
  constexpr size_t kW = V::kWidth;
  constexpr size_t kStep = kW * sizeof(T);  // bytes per register
  const auto* s0 = static_cast<const unsigned char*>(srcs[0]);
  for (; i + 4 * kW <= count; i += 4 * kW) {
    const size_t off = i * sizeof(T);
    R a0 = V::load(s0 + off);
    R a1 = V::load(s0 + off + kStep);
    R a2 = V::load(s0 + off + 2 * kStep);
    R a3 = V::load(s0 + off + 3 * kStep);
    for (int k = 1; k < nsrc; ++k) {
      const auto* s = static_cast<const unsigned char*>(srcs[k]) + off;
      a0 = vectorOp<V, kOp>(a0, V::load(s));
      a1 = vectorOp<V, kOp>(a1, V::load(s + kStep));
      a2 = vectorOp<V, kOp>(a2, V::load(s + 2 * kStep));
      a3 = vectorOp<V, kOp>(a3, V::load(s + 3 * kStep));
    }
    V::template store<kStream>(d + off, a0);
    V::template store<kStream>(d + off + kStep, a1);
    V::template store<kStream>(d + off + 2 * kStep, a2);
    V::template store<kStream>(d + off + 3 * kStep, a3);
  }
  for (; i + kW <= count; i += kW) {
    const size_t off = i * sizeof(T);
    R a = V::load(s0 + off);
    for (int k = 1; k < nsrc; ++k) a = vectorOp<V, kOp>(a, V::load(static_cast<const unsigned char*>(srcs[k]) + off));
    V::template store<kStream>(d + off, a);
  }
  return i;
}

/// The vector kernel (ReduceFn signature). Large out-of-place results (>= kStreamThresholdBytes,
/// dst distinct from every source) are written with non-temporal stores: they would not stay in
/// cache anyway, and skipping the read-for-ownership of dst saves a quarter of the memory traffic of
/// a 2-source reduction. In-place results use plain stores (their lines are already cached).
template <class V, RedOp kOp>
void reduceVector(void* dst, const void* const* srcs, int nsrc, size_t count) {
  using T = typename V::T;
  if (nsrc == 1) {
    copyIfDistinct(dst, srcs[0], count * sizeof(T));
    return;
  }
  auto* d = static_cast<unsigned char*>(dst);
  const uintptr_t misalign = reinterpret_cast<uintptr_t>(dst) & 63;
  bool stream = count * sizeof(T) >= kStreamThresholdBytes && misalign % sizeof(T) == 0;
  for (int k = 0; k < nsrc && stream; ++k) stream = srcs[k] != dst;
  size_t i = 0;
  if (stream) {
    const size_t head = ((64 - misalign) & 63) / sizeof(T);  // elements until dst is 64-byte aligned
    reduceRange<T, kOp>(dst, srcs, nsrc, 0, head);
    i = reduceBody<V, kOp, true>(d, srcs, nsrc, head, count);
    _mm_sfence();  // order the streamed stores before whatever the caller does next
  } else {
    i = reduceBody<V, kOp, false>(d, srcs, nsrc, 0, count);
  }
  if (i < count) reduceRange<T, kOp>(dst, srcs, nsrc, i, count);
}

/// Puts reduceVector<V, op> in the table for every op V vectorises; leaves the others alone.
template <class V>
void installVector(KernelTable& table, DataType type) {
  ReduceFn* row = table.reduce[static_cast<int>(type)];
  if constexpr (hasVectorOp<V, RedOp::Sum>()) row[kernelOpIndex(RedOp::Sum)] = &reduceVector<V, RedOp::Sum>;
  if constexpr (hasVectorOp<V, RedOp::Prod>()) row[kernelOpIndex(RedOp::Prod)] = &reduceVector<V, RedOp::Prod>;
  if constexpr (hasVectorOp<V, RedOp::Max>()) row[kernelOpIndex(RedOp::Max)] = &reduceVector<V, RedOp::Max>;
  if constexpr (hasVectorOp<V, RedOp::Min>()) row[kernelOpIndex(RedOp::Min)] = &reduceVector<V, RedOp::Min>;
  if constexpr (hasVectorOp<V, RedOp::Band>()) row[kernelOpIndex(RedOp::Band)] = &reduceVector<V, RedOp::Band>;
  if constexpr (hasVectorOp<V, RedOp::Bor>()) row[kernelOpIndex(RedOp::Bor)] = &reduceVector<V, RedOp::Bor>;
  if constexpr (hasVectorOp<V, RedOp::Bxor>()) row[kernelOpIndex(RedOp::Bxor)] = &reduceVector<V, RedOp::Bxor>;
}

}  // namespace
}  // namespace conflux::cpu::detail
