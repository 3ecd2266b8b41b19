// Portable element loop of the reduce kernels: the whole scalar path, and the tails of the vector
// paths. Included by the per-ISA translation units; everything here has internal linkage so that
// each one gets its own copy compiled for its own instruction set.
#pragma once

#include <cstddef>
#include <cstring>

#include "core/copy_bytes.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/reduce_ops.h"

namespace conflux::cpu::detail {
namespace {

/// Element i of a buffer of T with no alignment requirement.
template <class T>
CFX_INLINE T loadElement(const void* base, size_t i) {
  T v;
  memcpy(&v, static_cast<const unsigned char*>(base) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
CFX_INLINE void storeElement(void* base, size_t i, T v) {
  memcpy(static_cast<unsigned char*>(base) + i * sizeof(T), &v, sizeof(T));
}

/// nsrc == 1: the result is the source itself.
CFX_INLINE void copyIfDistinct(void* dst, const void* src, size_t bytes) {
  if (dst != src) copyBytes(dst, src, bytes);
}

/// dst[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) for begin <= i < end, nsrc >= 2. Works in blocks
/// so the inner loops run over one source at a time (auto-vectorisable); every element still
/// sees its sources in order 0, 1, ..., nsrc-1, like the vector paths.
template <class T, RedOp kOp>
void reduceRange(void* dst, const void* const* srcs, int nsrc, size_t begin, size_t end) {
  using Acc = Accumulator<T>;
  using A = typename Acc::Type;
  constexpr size_t kBlock = 256;
  A acc[kBlock];
  for (size_t base = begin; base < end; base += kBlock) {
    const size_t n = end - base < kBlock ? end - base : kBlock;
    const void* s0 = srcs[0];
    for (size_t j = 0; j < n; ++j) acc[j] = Acc::widen(loadElement<T>(s0, base + j));
    for (int k = 1; k < nsrc; ++k) {
      const void* s = srcs[k];
      for (size_t j = 0; j < n; ++j) acc[j] = applyOp<kOp>(acc[j], Acc::widen(loadElement<T>(s, base + j)));
    }
    for (size_t j = 0; j < n; ++j) storeElement<T>(dst, base + j, Acc::narrow(acc[j]));
  }
}

/// PreMulSum over [begin, end): like reduceRange<T, Sum>, except that the sources whose bit is set in
/// `mask` are multiplied by `scale` (an accumulator value) as they are loaded.
template <class T>
void premulRange(void* dst, const void* const* srcs, int nsrc, size_t begin, size_t end, uint64_t mask,
                 typename Accumulator<T>::Type scale) {
  using Acc = Accumulator<T>;
  using A = typename Acc::Type;
  constexpr size_t kBlock = 256;
  A acc[kBlock];
  auto scaled = [mask](int k) { return k < 64 && ((mask >> k) & 1u) != 0; };
  for (size_t base = begin; base < end; base += kBlock) {
    const size_t n = end - base < kBlock ? end - base : kBlock;
    const void* s0 = srcs[0];
    if (scaled(0)) {
      for (size_t j = 0; j < n; ++j) acc[j] = scaleValue(Acc::widen(loadElement<T>(s0, base + j)), scale);
    } else {
      for (size_t j = 0; j < n; ++j) acc[j] = Acc::widen(loadElement<T>(s0, base + j));
    }
    for (int k = 1; k < nsrc; ++k) {
      const void* s = srcs[k];
      if (scaled(k)) {
        for (size_t j = 0; j < n; ++j)
          acc[j] = applyOp<RedOp::Sum>(acc[j], scaleValue(Acc::widen(loadElement<T>(s, base + j)), scale));
      } else {
        for (size_t j = 0; j < n; ++j) acc[j] = applyOp<RedOp::Sum>(acc[j], Acc::widen(loadElement<T>(s, base + j)));
      }
    }
    for (size_t j = 0; j < n; ++j) storeElement<T>(dst, base + j, Acc::narrow(acc[j]));
  }
}

/// The PreMulSum kernel (PremulFn signature); compiled once per instruction-set file.
template <class T>
void premulSum(void* dst, const void* const* srcs, int nsrc, size_t count, uint64_t mask, const void* scalar) {
  if (nsrc < 64) mask &= (uint64_t{1} << nsrc) - 1;
  if (mask == 0) {
    if (nsrc == 1) {
      copyIfDistinct(dst, srcs[0], count * sizeof(T));
      return;
    }
    reduceRange<T, RedOp::Sum>(dst, srcs, nsrc, 0, count);
    return;
  }
  premulRange<T>(dst, srcs, nsrc, 0, count, mask, Accumulator<T>::widen(loadElement<T>(scalar, 0)));
}

/// Puts premulSum<T> of every type into the table (each ISA file compiles its own copy).
inline void installPremul(KernelTable& table) {
  table.premul[static_cast<int>(DataType::Int8)] = &premulSum<int8_t>;
  table.premul[static_cast<int>(DataType::Uint8)] = &premulSum<uint8_t>;
  table.premul[static_cast<int>(DataType::Int32)] = &premulSum<int32_t>;
  table.premul[static_cast<int>(DataType::Uint32)] = &premulSum<uint32_t>;
  table.premul[static_cast<int>(DataType::Int64)] = &premulSum<int64_t>;
  table.premul[static_cast<int>(DataType::Uint64)] = &premulSum<uint64_t>;
  table.premul[static_cast<int>(DataType::Float16)] = &premulSum<Float16>;
  table.premul[static_cast<int>(DataType::Float32)] = &premulSum<float>;
  table.premul[static_cast<int>(DataType::Float64)] = &premulSum<double>;
  table.premul[static_cast<int>(DataType::Bfloat16)] = &premulSum<Bfloat16>;
}

/// The portable kernel (ReduceFn signature).
template <class T, RedOp kOp>
void reduceScalar(void* dst, const void* const* srcs, int nsrc, size_t count) {
  if (nsrc == 1) {
    copyIfDistinct(dst, srcs[0], count * sizeof(T));
    return;
  }
  reduceRange<T, kOp>(dst, srcs, nsrc, 0, count);
}

}  // namespace
}  // namespace conflux::cpu::detail
