// Device-side building blocks of the CUDA reduce kernels, for any kernel that reduces or copies slices
// (launchReduce in reduce.cu, the CUDA-IPC all-reduce kernels). Include from .cu files only.
//
// Schedule of reduceRange (one call = one worker's share of a range of `count` elements):
//
//   When every pointer (dst, dst2, each source) has the same address mod 16, the range splits into
//     head  [0, h)                  h < 16 / sizeof(T) elements, up to the first 16-byte boundary
//     body  [h, h + nvec * V)       nvec 16-byte vectors of V = 16 / sizeof(T) elements
//     tail  [h + nvec * V, count)   fewer than V elements
//   The body is grid-stride over vectors: worker `tid` of `nthreads` takes vectors tid, tid + nthreads,
//   ..., kUnroll of them per round (tid + u * nthreads, u < kUnroll), so consecutive workers touch
//   consecutive 16-byte words (coalesced) and each worker has kUnroll independent loads in flight per
//   source. For each source in order 0..nsrc-1 it loads the kUnroll vectors, then folds them into
//   per-element accumulators; the results are stored to dst (and dst2) only after every source is read.
//   Head and tail elements are spread over the workers one element each.
//   Otherwise (pointers disagree mod 16) every element takes the scalar path, grid-stride by element.
//
// Element i is read and written by exactly one worker, every source before any store, so dst (and dst2)
// may alias a source exactly (in place); partial overlap is not allowed. Loads are plain (coherent)
// global loads, never the read-only/non-coherent path, so the function may read buffers that other
// GPUs wrote before a flag the caller synchronised on.
// Every pointer must be aligned to sizeof(T) (the natural alignment; CUDA cannot load unaligned data).
//
// Arithmetic follows kernels/reduce_ops.h bit for bit (the same functions): integer Sum/Prod wrap,
// float32/float64 are single IEEE operations, float16/bfloat16 accumulate every source in float32 and
// round once, Max/Min are IEEE 754-2019 maximum/minimum, Band/Bor/Bxor (integers only) are bitwise. nsrc == 1 copies raw bits (a NaN payload or a
// signalling NaN survives unchanged, as with cpu::reduceFunction). The one difference from the CPU is
// the payload of a NaN produced by arithmetic (GPUs return the canonical NaN): it is still a NaN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/types.h"
#include "kernels/cuda/reduce.h"
#include "kernels/reduce_ops.h"

namespace conflux::cuda {

namespace detail {

/// Bytes per vector access.
inline constexpr size_t kVecBytes = 16;

/// Vectors per worker per round: enough loads in flight without spilling under the register budget of
/// __launch_bounds__(256, 4) (64 registers). The 1- and 2-byte types hold 16 or 8 32-bit accumulators
/// per vector, the 8-byte types need register pairs for every value and for 64-bit integer arithmetic.
template <class T>
inline constexpr int kUnroll = sizeof(T) == 4 ? 4 : sizeof(T) == 1 ? 1 : 2;

/// One 16-byte vector of T, as raw words (loads and stores are single 128-bit accesses).
using Vec = uint4;

template <class T>
__device__ __forceinline__ void unpack(const Vec& v, T (&e)[kVecBytes / sizeof(T)]) {
  memcpy(e, &v, kVecBytes);
}
template <class T>
__device__ __forceinline__ Vec pack(const T (&e)[kVecBytes / sizeof(T)]) {
  Vec v;
  memcpy(&v, e, kVecBytes);
  return v;
}

/// How a range splits into a scalar head, 16-byte vectors and a scalar tail (see the schedule above).
struct Split {
  size_t head;       ///< elements before the first 16-byte boundary
  size_t nvec;       ///< whole 16-byte vectors after the head
  size_t tailBegin;  ///< first element of the tail (head + nvec * V)
};

/// Split of `count` elements of T starting at `p` (p aligned to sizeof(T)).
template <class T>
__device__ __forceinline__ Split splitRange(const void* p, size_t count) {
  constexpr size_t kV = kVecBytes / sizeof(T);
  const size_t mis = reinterpret_cast<uintptr_t>(p) % kVecBytes;
  size_t head = ((kVecBytes - mis) % kVecBytes) / sizeof(T);
  if (head > count) head = count;
  const size_t nvec = (count - head) / kV;
  return Split{head, nvec, head + nvec * kV};
}

/// One element through the scalar path: dst[i] = op over sources (raw copy when nsrc == 1).
template <class T, RedOp kOp>
__device__ __forceinline__ void reduceElement(T* dst, T* dst2, const T* const* srcs, int nsrc, size_t i) {
  using Acc = Accumulator<T>;
  T out;
  if (nsrc == 1) {
    out = srcs[0][i];
  } else {
    typename Acc::Type acc = Acc::widen(srcs[0][i]);
    for (int k = 1; k < nsrc; ++k) acc = applyOp<kOp>(acc, Acc::widen(srcs[k][i]));
    out = Acc::narrow(acc);
  }
  dst[i] = out;
  if (dst2 != nullptr) dst2[i] = out;
}

/// The body of reduceRange: vectors [0, nvec) of the arrays starting at element `base` (16-byte aligned).
template <class T, RedOp kOp>
__device__ __forceinline__ void reduceVectors(T* dst, T* dst2, const T* const* srcs, int nsrc, size_t base,
                                              size_t nvec, size_t tid, size_t nthreads) {
  using Acc = Accumulator<T>;
  using A = typename Acc::Type;
  constexpr int kV = static_cast<int>(kVecBytes / sizeof(T));
  constexpr int kU = kUnroll<T>;
  Vec* out = reinterpret_cast<Vec*>(dst + base);
  Vec* out2 = dst2 != nullptr ? reinterpret_cast<Vec*>(dst2 + base) : nullptr;
  for (size_t first = tid; first < nvec; first += nthreads * kU) {
    Vec v[kU] = {};
    const Vec* s0 = reinterpret_cast<const Vec*>(srcs[0] + base);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const size_t j = first + u * nthreads;
      if (j < nvec) v[u] = s0[j];
    }
    if (nsrc > 1) {
      A acc[kU][kV];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        T e[kV];
        unpack(v[u], e);
#pragma unroll
        for (int x = 0; x < kV; ++x) acc[u][x] = Acc::widen(e[x]);
      }
      for (int k = 1; k < nsrc; ++k) {
        const Vec* s = reinterpret_cast<const Vec*>(srcs[k] + base);
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          const size_t j = first + u * nthreads;
          if (j < nvec) v[u] = s[j];
        }
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          T e[kV];
          unpack(v[u], e);
#pragma unroll
          for (int x = 0; x < kV; ++x) acc[u][x] = applyOp<kOp>(acc[u][x], Acc::widen(e[x]));
        }
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        T e[kV];
#pragma unroll
        for (int x = 0; x < kV; ++x) e[x] = Acc::narrow(acc[u][x]);
        v[u] = pack(e);
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const size_t j = first + u * nthreads;
      if (j < nvec) {
        out[j] = v[u];
        if (out2 != nullptr) out2[j] = v[u];
      }
    }
  }
}

}  // namespace detail

/// dst[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) for i in [0, count), nsrc in 1..8 (1 = copy).
/// dst2, when not null, receives the same values (fused reduce-and-copy: one read, two writes).
/// This call does worker `tid`'s share of `nthreads` workers (grid-stride; any nthreads >= 1 works).
/// 16-byte vector accesses when every pointer has the same alignment mod 16, scalar head/tail around
/// them; scalar elements otherwise. 16-bit floats accumulate in float32 and round once (the bits of
/// cpu::reduceFunction). Avg behaves as Sum. Pointers must be aligned to sizeof(T); dst and dst2 may
/// equal a source but not overlap one partially.
template <class T, RedOp kOp>
__device__ void reduceRange(T* dst, T* dst2, const T* const* srcs, int nsrc, size_t count, size_t tid,
                            size_t nthreads) {
  bool aligned = true;
  const uintptr_t mis = reinterpret_cast<uintptr_t>(dst) % detail::kVecBytes;
  if (dst2 != nullptr && reinterpret_cast<uintptr_t>(dst2) % detail::kVecBytes != mis) aligned = false;
  for (int k = 0; k < nsrc; ++k)
    if (reinterpret_cast<uintptr_t>(srcs[k]) % detail::kVecBytes != mis) aligned = false;
  if (!aligned) {
    for (size_t i = tid; i < count; i += nthreads) detail::reduceElement<T, kOp>(dst, dst2, srcs, nsrc, i);
    return;
  }
  const detail::Split s = detail::splitRange<T>(dst, count);
  for (size_t i = tid; i < s.head; i += nthreads) detail::reduceElement<T, kOp>(dst, dst2, srcs, nsrc, i);
  detail::reduceVectors<T, kOp>(dst, dst2, srcs, nsrc, s.head, s.nvec, tid, nthreads);
  for (size_t i = s.tailBegin + tid; i < count; i += nthreads)
    detail::reduceElement<T, kOp>(dst, dst2, srcs, nsrc, i);
}

namespace detail {
/// dst[i] = f(src[i]) for i in [0, count), worker `tid`'s share of `nthreads`: 16-byte vectors when dst and
/// src agree mod 16 (head and tail elements around them), scalar elements otherwise. dst may equal src.
template <class T, class F>
__device__ __forceinline__ void mapRange(T* dst, const T* src, size_t count, F f, size_t tid, size_t nthreads) {
  if (reinterpret_cast<uintptr_t>(dst) % kVecBytes != reinterpret_cast<uintptr_t>(src) % kVecBytes) {
    for (size_t i = tid; i < count; i += nthreads) dst[i] = f(src[i]);
    return;
  }
  constexpr int kV = static_cast<int>(kVecBytes / sizeof(T));
  const Split sp = splitRange<T>(dst, count);
  for (size_t i = tid; i < sp.head; i += nthreads) dst[i] = f(src[i]);
  Vec* out = reinterpret_cast<Vec*>(dst + sp.head);
  const Vec* in = reinterpret_cast<const Vec*>(src + sp.head);
  for (size_t j = tid; j < sp.nvec; j += nthreads) {
    T e[kV];
    unpack(in[j], e);
#pragma unroll
    for (int x = 0; x < kV; ++x) e[x] = f(e[x]);
    out[j] = pack(e);
  }
  for (size_t i = sp.tailBegin + tid; i < count; i += nthreads) dst[i] = f(src[i]);
}
}  // namespace detail

/// data[i] = data[i] / divisor, worker `tid`'s share of `nthreads` (the final step of Avg): integers
/// divide the stored value with truncation, float32/float64 one IEEE division, 16-bit floats divide in
/// float32 and round once; the bits of cpu::divideInPlace. divisor >= 1.
template <class T>
__device__ void divideRange(T* data, size_t count, int divisor, size_t tid, size_t nthreads) {
  auto divide = [divisor](T x) -> T {
    if constexpr (std::is_integral_v<T>) {
      using W = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
      return static_cast<T>(static_cast<W>(x) / static_cast<W>(divisor));
    } else if constexpr (std::is_floating_point_v<T>) {
      return x / static_cast<T>(divisor);
    } else {
      return Accumulator<T>::narrow(Accumulator<T>::widen(x) / static_cast<float>(divisor));
    }
  };
  detail::mapRange(data, data, count, divide, tid, nthreads);
}

/// dst[i] = s * src[i] for i in [0, count) (PreMulSum's scaled copy of a rank's input), worker `tid`'s
/// share of `nthreads`: the accumulator-type multiplication of scaleValue (reduce_ops.h), rounded once for
/// the 16-bit floats, integers wrapping; the bits of cpu::premulSumFunction with one scaled source.
/// dst may equal src.
template <class T>
__device__ void scaleRange(T* dst, const T* src, size_t count, typename Accumulator<T>::Type s, size_t tid,
                           size_t nthreads) {
  using Acc = Accumulator<T>;
  detail::mapRange(dst, src, count, [s](T x) -> T { return Acc::narrow(scaleValue(Acc::widen(x), s)); }, tid, nthreads);
}

namespace detail {
template <class T, class F>
__host__ bool dispatchOp(RedOp op, F&& f) {
  switch (op) {
    case RedOp::Sum: case RedOp::Avg: case RedOp::PreMulSum: f.template operator()<T, RedOp::Sum>(); return true;
    case RedOp::Prod: f.template operator()<T, RedOp::Prod>(); return true;
    case RedOp::Max: f.template operator()<T, RedOp::Max>(); return true;
    case RedOp::Min: f.template operator()<T, RedOp::Min>(); return true;
    case RedOp::Band: case RedOp::Bor: case RedOp::Bxor:
      if constexpr (std::is_integral_v<T>) {
        if (op == RedOp::Band) f.template operator()<T, RedOp::Band>();
        else if (op == RedOp::Bor) f.template operator()<T, RedOp::Bor>();
        else f.template operator()<T, RedOp::Bxor>();
        return true;
      } else {
        return false;  // bitwise ops exist for integer types only
      }
  }
  return false;
}
}  // namespace detail

/// Calls f.template operator()<T, kOp>() for the storage type T of `type` (StorageOf) and `op`, with
/// Avg and PreMulSum mapped to Sum (the caller divides afterwards, or scaled the inputs as it copied
/// them). Returns false, without calling f, for invalid enums and for a bitwise op on a floating type.
template <class F>
__host__ bool dispatchTypeOp(DataType type, RedOp op, F&& f) {
  switch (type) {
    case DataType::Int8: return detail::dispatchOp<int8_t>(op, f);
    case DataType::Uint8: return detail::dispatchOp<uint8_t>(op, f);
    case DataType::Int32: return detail::dispatchOp<int32_t>(op, f);
    case DataType::Uint32: return detail::dispatchOp<uint32_t>(op, f);
    case DataType::Int64: return detail::dispatchOp<int64_t>(op, f);
    case DataType::Uint64: return detail::dispatchOp<uint64_t>(op, f);
    case DataType::Float16: return detail::dispatchOp<Float16>(op, f);
    case DataType::Float32: return detail::dispatchOp<float>(op, f);
    case DataType::Float64: return detail::dispatchOp<double>(op, f);
    case DataType::Bfloat16: return detail::dispatchOp<Bfloat16>(op, f);
  }
  return false;
}

}  // namespace conflux::cuda
