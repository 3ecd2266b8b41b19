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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

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

/// One step of the vector loops: the 4 registers at byte `off` of every source, combined in source
/// order (each register loaded from every source before anything is stored).
template <class V, RedOp kOp>
CFX_INLINE void reduceFour(const void* const* srcs, int nsrc, size_t off, typename V::R& a0, typename V::R& a1,
                           typename V::R& a2, typename V::R& a3) {
  constexpr size_t kStep = V::kWidth * sizeof(typename V::T);  // bytes per register
  const auto* s0 = static_cast<const unsigned char*>(srcs[0]) + off;
  a0 = V::load(s0);
  a1 = V::load(s0 + kStep);
  a2 = V::load(s0 + 2 * kStep);
  a3 = V::load(s0 + 3 * kStep);
  for (int k = 1; k < nsrc; ++k) {
    const auto* s = static_cast<const unsigned char*>(srcs[k]) + off;
    a0 = vectorOp<V, kOp>(a0, V::load(s));
    a1 = vectorOp<V, kOp>(a1, V::load(s + kStep));
    a2 = vectorOp<V, kOp>(a2, V::load(s + 2 * kStep));
    a3 = vectorOp<V, kOp>(a3, V::load(s + 3 * kStep));
  }
}

/// The single-register step of the vector loops' tails.
template <class V, RedOp kOp>
CFX_INLINE typename V::R reduceOne(const void* const* srcs, int nsrc, size_t off) {
  typename V::R a = V::load(static_cast<const unsigned char*>(srcs[0]) + off);
  for (int k = 1; k < nsrc; ++k) a = vectorOp<V, kOp>(a, V::load(static_cast<const unsigned char*>(srcs[k]) + off));
  return a;
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
  for (; i + 4 * kW <= count; i += 4 * kW) {
    const size_t off = i * sizeof(T);
    R a0, a1, a2, a3;
    reduceFour<V, kOp>(srcs, nsrc, off, a0, a1, a2, a3);
    V::template store<kStream>(d + off, a0);
    V::template store<kStream>(d + off + kStep, a1);
    V::template store<kStream>(d + off + 2 * kStep, a2);
    V::template store<kStream>(d + off + 3 * kStep, a3);
  }
  for (; i + kW <= count; i += kW) {
    const size_t off = i * sizeof(T);
    const R a = reduceOne<V, kOp>(srcs, nsrc, off);
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

/// How far ahead of the loads the fan-out kernel prefetches its sources. The hardware prefetchers stop
/// at 4 KiB page boundaries, and the buffers a direct all-reduce reads are shared mappings of small
/// pages; 1 KiB ahead measured best end to end (2-rank -R 1 all-reduce of 256 MiB, out of place,
/// medians of 6 interleaved: none 8.6 GB/s, 512 B 9.1, 1 KiB 9.9, 2 KiB 9.1). Prefetches past the end
/// of a buffer are harmless (a prefetch never faults).
inline constexpr size_t kFanoutPrefetchBytes = 1024;

/// The fan-out kernel (FanoutFn): each register, once reduced, is streamed to every destination, so
/// the sources are read once and no destination line is read for ownership. The unaligned head and
/// the tail go through the portable loop into dsts[0] and are copied to the others.
template <class V, RedOp kOp>
void reduceFanoutVector(void* const* dsts, int ndst, const void* const* srcs, int nsrc, size_t count) {
  using T = typename V::T;
  using R = typename V::R;
  constexpr size_t kW = V::kWidth;
  constexpr size_t kStep = kW * sizeof(T);
  const size_t misalign = reinterpret_cast<uintptr_t>(dsts[0]) & 63;
  const size_t head = std::min(count, ((64 - misalign) & 63) / sizeof(T));
  auto copyOut = [&](size_t begin, size_t end) {
    if (end <= begin) return;
    reduceRange<T, kOp>(dsts[0], srcs, nsrc, begin, end);
    for (int k = 1; k < ndst; ++k) {
      memcpy(static_cast<unsigned char*>(dsts[k]) + begin * sizeof(T),
             static_cast<const unsigned char*>(dsts[0]) + begin * sizeof(T), (end - begin) * sizeof(T));
    }
  };
  copyOut(0, head);
  size_t i = head;
  for (; i + 4 * kW <= count; i += 4 * kW) {
    const size_t off = i * sizeof(T);
    R a0, a1, a2, a3;
    reduceFour<V, kOp>(srcs, nsrc, off, a0, a1, a2, a3);
    for (int k = 0; k < nsrc; ++k) {
      // As integers: the address may lie past the buffer, where pointer arithmetic is undefined.
      const uintptr_t ahead = reinterpret_cast<uintptr_t>(srcs[k]) + off + kFanoutPrefetchBytes;
      for (size_t b = 0; b < 4 * kStep; b += 64) _mm_prefetch(reinterpret_cast<const char*>(ahead + b), _MM_HINT_T0);
    }
    for (int k = 0; k < ndst; ++k) {
      auto* d = static_cast<unsigned char*>(dsts[k]) + off;
      V::template store<true>(d, a0);
      V::template store<true>(d + kStep, a1);
      V::template store<true>(d + 2 * kStep, a2);
      V::template store<true>(d + 3 * kStep, a3);
    }
  }
  for (; i + kW <= count; i += kW) {
    const size_t off = i * sizeof(T);
    const R a = reduceOne<V, kOp>(srcs, nsrc, off);
    for (int k = 0; k < ndst; ++k) V::template store<true>(static_cast<unsigned char*>(dsts[k]) + off, a);
  }
  _mm_sfence();  // order the streamed stores before whatever the caller does next
  copyOut(i, count);
}

/// Puts reduceVector<V, op> and reduceFanoutVector<V, op> in the table for every op V vectorises;
/// leaves the others alone.
template <class V>
void installVector(KernelTable& table, DataType type) {
  ReduceFn* row = table.reduce[static_cast<int>(type)];
  FanoutFn* fan = table.fanout[static_cast<int>(type)];
  auto put = [&]<RedOp kOp>() {
    if constexpr (hasVectorOp<V, kOp>()) {
      row[kernelOpIndex(kOp)] = &reduceVector<V, kOp>;
      fan[kernelOpIndex(kOp)] = &reduceFanoutVector<V, kOp>;
    }
  };
  put.template operator()<RedOp::Sum>();
  put.template operator()<RedOp::Prod>();
  put.template operator()<RedOp::Max>();
  put.template operator()<RedOp::Min>();
  put.template operator()<RedOp::Band>();
  put.template operator()<RedOp::Bor>();
  put.template operator()<RedOp::Bxor>();
}

}  // namespace
}  // namespace conflux::cpu::detail
