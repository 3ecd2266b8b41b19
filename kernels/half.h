// 16-bit floating-point storage types (IEEE float16 and bfloat16) with exact float32 conversions.
//
// Both types are plain 16-bit structs: arithmetic is done in float32 and rounded back once.
// Conversion rules (identical on every path, and identical to x86 F16C hardware):
//   - widening (to float32) is exact for every non-NaN value, float16 subnormals included;
//   - narrowing (from float32) rounds to nearest, ties to even; values at or beyond the overflow
//     threshold become +-inf; results below the smallest subnormal round to +-0 (ties to even);
//   - NaN stays NaN: the sign and the top payload bits are kept and the quiet bit is set, so a
//     signalling NaN comes back quiet (float16 0x7C01 -> float32 0x7FC02000 -> float16 0x7E01).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define CFX_HOST_DEVICE __host__ __device__
#define CFX_INLINE __forceinline__
#else
/// Marks functions callable from host and CUDA device code (empty outside nvcc).
#define CFX_HOST_DEVICE
/// Forces inlining. The kernel headers are included by translation units built for different
/// instruction sets; always-inlined functions never leave an out-of-line copy that the linker could
/// pick for a CPU that lacks the instruction set (the classic ODR/SIGILL trap of per-ISA files).
#define CFX_INLINE inline __attribute__((always_inline))
#endif

namespace conflux {

/// Bit pattern of a float32.
CFX_HOST_DEVICE CFX_INLINE uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
/// float32 with the given bit pattern.
CFX_HOST_DEVICE CFX_INLINE float floatFromBits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
/// Bit pattern of a float64.
CFX_HOST_DEVICE CFX_INLINE uint64_t doubleBits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/// Sign bit of a float32 / float64 (true for -0.0 and negative NaNs).
CFX_HOST_DEVICE CFX_INLINE bool floatSignBit(float f) { return (floatBits(f) >> 31) != 0; }
CFX_HOST_DEVICE CFX_INLINE bool floatSignBit(double d) { return (doubleBits(d) >> 63) != 0; }

/// float16 bits -> float32 (exact; NaN comes back quiet with its payload).
CFX_HOST_DEVICE CFX_INLINE float halfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) {  // inf or NaN
    const uint32_t quiet = mant ? 0x00400000u : 0u;
    return floatFromBits(sign | 0x7F800000u | quiet | (mant << 13));
  }
  if (exp == 0) {
    // Zero or subnormal: value = mant * 2^-24, exact in float32 (mant has at most 10 bits and the
    // product is a float32 normal, so flush-to-zero modes cannot touch it).
    const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;  // 2^-24
    return floatFromBits(sign | floatBits(magnitude));
  }
  return floatFromBits(sign | ((exp + 112u) << 23) | (mant << 13));
}

/// float32 -> float16 bits, round to nearest even, overflow to inf, exact subnormals, quiet NaN.
CFX_HOST_DEVICE CFX_INLINE uint16_t floatToHalfBits(float f) {
  const uint32_t x = floatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u)  // NaN: keep the top payload bits, set the quiet bit
    return static_cast<uint16_t>(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
  if (ax >= 0x477FF000u)  // >= 65520 (max 65504 + half an ulp, a tie that rounds to the odd side): inf
    return static_cast<uint16_t>(sign | 0x7C00u);
  if (ax >= 0x38800000u) {  // normal float16 range (>= 2^-14)
    const uint32_t odd = (ax >> 13) & 1u;
    // Rebias the exponent (-112 << 23 == 0xC8000000 mod 2^32), add the rounding bias, then truncate.
    return static_cast<uint16_t>(sign | ((ax + 0xC8000FFFu + odd) >> 13));
  }
  if (ax < 0x33000000u) return sign;  // below 2^-25 (half the smallest subnormal): rounds to 0
  // Subnormal result: value = m * 2^(e - 150); the float16 unit is 2^-24, so shift right by 126 - e.
  const uint32_t e = ax >> 23;  // 102 .. 112
  const uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14 .. 24
  uint32_t r = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  if (rem > halfway || (rem == halfway && (r & 1u))) ++r;  // may carry into the smallest normal: fine
  return static_cast<uint16_t>(sign | r);
}

/// bfloat16 bits -> float32 (exact; NaN comes back quiet with its payload).
CFX_HOST_DEVICE CFX_INLINE float bf16BitsToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) u |= 0x00400000u;
  return floatFromBits(u);
}

/// float32 -> bfloat16 bits, round to nearest even, overflow to inf, quiet NaN. Subnormals are kept
/// (bfloat16 has float32's exponent range), unlike the AVX512-BF16 instructions, which flush them.
CFX_HOST_DEVICE CFX_INLINE uint16_t floatToBf16Bits(float f) {
  const uint32_t x = floatBits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

/// IEEE binary16 storage. Trivial and 2 bytes, so arrays of it alias raw buffers.
struct Float16 {
  uint16_t bits;
  CFX_HOST_DEVICE CFX_INLINE static Float16 fromBits(uint16_t b) { return Float16{b}; }
  /// Rounds to nearest even.
  CFX_HOST_DEVICE CFX_INLINE static Float16 fromFloat(float f) { return Float16{floatToHalfBits(f)}; }
  CFX_HOST_DEVICE CFX_INLINE float toFloat() const { return halfBitsToFloat(bits); }
};

/// bfloat16 storage (the top half of a float32).
struct Bfloat16 {
  uint16_t bits;
  CFX_HOST_DEVICE CFX_INLINE static Bfloat16 fromBits(uint16_t b) { return Bfloat16{b}; }
  /// Rounds to nearest even.
  CFX_HOST_DEVICE CFX_INLINE static Bfloat16 fromFloat(float f) { return Bfloat16{floatToBf16Bits(f)}; }
  CFX_HOST_DEVICE CFX_INLINE float toFloat() const { return bf16BitsToFloat(bits); }
};

static_assert(sizeof(Float16) == 2 && sizeof(Bfloat16) == 2, "16-bit storage types must be 2 bytes");

}  // namespace conflux
