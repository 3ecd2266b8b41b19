// Element-wise reduction operations, shared by the CPU kernels (scalar path and vector tails) and,
// later, the CUDA kernels. Plain functions on plain values; no state, no allocation.
//
// Semantics (every path, scalar and vector, host and device, follows them bit for bit):
//   - Sum / Prod on integers wrap modulo 2^bits (computed in unsigned arithmetic: no UB).
//   - Sum / Prod on float32/float64 are single IEEE operations in the element type.
//   - float16/bfloat16 widen to float32 (exact), reduce ALL sources in float32, and round to nearest
//     even once at the end (see half.h for the conversion rules).
//   - Max / Min on floating types follow IEEE 754-2019 maximum/minimum: if either input is NaN the
//     result is a quiet NaN (the NaN propagates; which payload survives when both are NaN is
//     unspecified); -0.0 < +0.0, so max(-0, +0) = +0 and min(-0, +0) = -0.
//   - Avg reduces as Sum; the caller divides once at the end (divideInPlace).
//   - Band / Bor / Bxor: bitwise and, or, xor, on integer types only (callers refuse floating types).
//   - PreMulSum reduces as Sum: each rank's own input is multiplied by its scalar where it is first read
//     (scaleValue), so partial results are plain sums of scaled inputs.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/types.h"
#include "kernels/half.h"

namespace conflux {

/// IEEE 754-2019 maximum: NaN propagates (quiet), -0 < +0.
template <class F>
CFX_HOST_DEVICE CFX_INLINE F ieeeMaximum(F a, F b) {
  if (a != a || b != b) return a + b;  // quiet NaN (an add quiets a signalling one)
  if (a == b) return floatSignBit(a) ? b : a;  // equal values differ at most in the sign of zero
  return a > b ? a : b;
}

/// IEEE 754-2019 minimum: NaN propagates (quiet), -0 < +0.
template <class F>
CFX_HOST_DEVICE CFX_INLINE F ieeeMinimum(F a, F b) {
  if (a != a || b != b) return a + b;
  if (a == b) return floatSignBit(a) ? a : b;
  return a < b ? a : b;
}

/// Accumulator of a storage type: float for the 16-bit floats, the type itself otherwise.
/// widen() is exact; narrow() rounds to nearest even for the 16-bit floats.
template <class T>
struct Accumulator {
  using Type = T;
  CFX_HOST_DEVICE CFX_INLINE static T widen(T v) { return v; }
  CFX_HOST_DEVICE CFX_INLINE static T narrow(T v) { return v; }
};
template <>
struct Accumulator<Float16> {
  using Type = float;
  CFX_HOST_DEVICE CFX_INLINE static float widen(Float16 v) { return v.toFloat(); }
  CFX_HOST_DEVICE CFX_INLINE static Float16 narrow(float v) { return Float16::fromFloat(v); }
};
template <>
struct Accumulator<Bfloat16> {
  using Type = float;
  CFX_HOST_DEVICE CFX_INLINE static float widen(Bfloat16 v) { return v.toFloat(); }
  CFX_HOST_DEVICE CFX_INLINE static Bfloat16 narrow(float v) { return Bfloat16::fromFloat(v); }
};

/// op(a, b) on an accumulator value (an integer type, float or double). Avg and PreMulSum behave as Sum;
/// the bitwise ops exist for integers only.
template <RedOp kOp, class A>
CFX_HOST_DEVICE CFX_INLINE A applyOp(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    if constexpr (kOp == RedOp::Band) {
      return static_cast<A>(a & b);
    } else if constexpr (kOp == RedOp::Bor) {
      return static_cast<A>(a | b);
    } else if constexpr (kOp == RedOp::Bxor) {
      return static_cast<A>(a ^ b);
    } else if constexpr (kOp == RedOp::Sum || kOp == RedOp::Avg || kOp == RedOp::PreMulSum) {
      return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else if constexpr (kOp == RedOp::Prod) {
      // Promote 8-bit values to unsigned int so the product cannot overflow a signed int.
      using P = std::conditional_t<(sizeof(A) < sizeof(unsigned)), unsigned, U>;
      return static_cast<A>(static_cast<U>(static_cast<P>(static_cast<U>(a)) * static_cast<P>(static_cast<U>(b))));
    } else if constexpr (kOp == RedOp::Max) {
      return a > b ? a : b;
    } else {
      return a < b ? a : b;
    }
  } else {
    static_assert(kOp != RedOp::Band && kOp != RedOp::Bor && kOp != RedOp::Bxor,
                  "bitwise reductions are defined for integer types only");
    if constexpr (kOp == RedOp::Sum || kOp == RedOp::Avg || kOp == RedOp::PreMulSum) {
      return a + b;
    } else if constexpr (kOp == RedOp::Prod) {
      return a * b;
    } else if constexpr (kOp == RedOp::Max) {
      return ieeeMaximum(a, b);
    } else {
      return ieeeMinimum(a, b);
    }
  }
}

/// s * x on accumulator values: the pre-multiplication of PreMulSum. Integers wrap (as Prod does); floats
/// take one IEEE multiplication in the accumulator type, never contracted with a following add.
template <class A>
CFX_HOST_DEVICE CFX_INLINE A scaleValue(A x, A s) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<A, float>) return __fmul_rn(x, s);
  else if constexpr (std::is_same_v<A, double>) return __dmul_rn(x, s);
  else return applyOp<RedOp::Prod>(x, s);
#else
  return applyOp<RedOp::Prod>(x, s);
#endif
}

/// The storage type of a DataType (Float16/Bfloat16 for the 16-bit floats).
template <DataType kType>
struct StorageOf;
template <> struct StorageOf<DataType::Int8> { using Type = int8_t; };
template <> struct StorageOf<DataType::Uint8> { using Type = uint8_t; };
template <> struct StorageOf<DataType::Int32> { using Type = int32_t; };
template <> struct StorageOf<DataType::Uint32> { using Type = uint32_t; };
template <> struct StorageOf<DataType::Int64> { using Type = int64_t; };
template <> struct StorageOf<DataType::Uint64> { using Type = uint64_t; };
template <> struct StorageOf<DataType::Float16> { using Type = Float16; };
template <> struct StorageOf<DataType::Float32> { using Type = float; };
template <> struct StorageOf<DataType::Float64> { using Type = double; };
template <> struct StorageOf<DataType::Bfloat16> { using Type = Bfloat16; };

}  // namespace conflux
