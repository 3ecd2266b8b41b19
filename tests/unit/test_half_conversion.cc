// float16/bfloat16 <-> float32 conversions (kernels/half.h): exhaustive widening and round trips,
// every rounding tie, overflow, subnormals and NaN, against the independent reference, and against
// the F16C hardware conversions where the CPU has them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernel_reference.h"
#include "kernels/cpu/isa.h"
#include "kernels/half.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

using conflux::bf16BitsToFloat;
using conflux::floatBits;
using conflux::floatFromBits;
using conflux::floatToBf16Bits;
using conflux::floatToHalfBits;
using conflux::halfBitsToFloat;

namespace {

TEST(HalfKernelConversion, WideningIsExactForAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto b = static_cast<uint16_t>(h);
    const float f = halfBitsToFloat(b);
    if (kref::halfIsNan(b)) {
      // Quiet NaN, sign and payload kept.
      const uint32_t want = (static_cast<uint32_t>(b & 0x8000) << 16) | 0x7FC00000u | (static_cast<uint32_t>(b & 0x3FF) << 13);
      ASSERT_EQ(floatBits(f), want) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), kref::halfToDouble(b)) << std::hex << h;
      ASSERT_EQ(std::signbit(f), (b & 0x8000) != 0) << std::hex << h;
    }
  }
}

TEST(HalfKernelConversion, AllPatternsRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto b = static_cast<uint16_t>(h);
    const uint16_t want = kref::halfIsNan(b) ? static_cast<uint16_t>(b | 0x200) : b;  // NaNs come back quiet
    ASSERT_EQ(floatToHalfBits(halfBitsToFloat(b)), want) << std::hex << h;
  }
}

TEST(HalfKernelConversion, EveryTieRoundsToEven) {
  for (uint16_t mag = 0; mag <= 0x7BFF; ++mag) {
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      const auto lo = static_cast<uint16_t>(sign | mag), hi = static_cast<uint16_t>(sign | (mag + 1));
      const double mid = (kref::halfToDouble(lo) + (mag == 0x7BFF ? (sign ? -65536.0 : 65536.0) : kref::halfToDouble(hi))) / 2;
      const auto midF = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(midF), mid);  // midpoints are exact in float32
      const uint16_t even = (mag & 1) ? hi : lo;
      ASSERT_EQ(floatToHalfBits(midF), even) << std::hex << mag;
      ASSERT_EQ(floatToHalfBits(std::nextafter(midF, 0.0f)), lo) << std::hex << mag;
      ASSERT_EQ(floatToHalfBits(std::nextafter(midF, sign ? -INFINITY : INFINITY)), hi) << std::hex << mag;
    }
  }
}

TEST(HalfKernelConversion, OverflowSubnormalsAndNan) {
  EXPECT_EQ(floatToHalfBits(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalfBits(65519.996f), 0x7BFF);
  EXPECT_EQ(floatToHalfBits(65520.0f), 0x7C00);
  EXPECT_EQ(floatToHalfBits(-65520.0f), 0xFC00);
  EXPECT_EQ(floatToHalfBits(1e10f), 0x7C00);
  EXPECT_EQ(floatToHalfBits(3.4028235e38f), 0x7C00);
  EXPECT_EQ(floatToHalfBits(INFINITY), 0x7C00);
  EXPECT_EQ(floatToHalfBits(-INFINITY), 0xFC00);
  EXPECT_EQ(floatToHalfBits(0.0f), 0x0000);
  EXPECT_EQ(floatToHalfBits(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);          // smallest subnormal
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);          // tie with 0: even
  EXPECT_EQ(floatToHalfBits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(floatToHalfBits(std::ldexp(3.0f, -25)), 0x0002);          // 1.5 ulp: tie, even
  EXPECT_EQ(floatToHalfBits(std::ldexp(1023.0f, -24)), 0x03FF);       // largest subnormal
  EXPECT_EQ(floatToHalfBits(std::ldexp(2047.0f, -25)), 0x0400);       // tie into smallest normal
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(floatToHalfBits(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(floatToHalfBits(1.0e-45f), 0x0000);                       // float32 subnormal
  EXPECT_EQ(floatToHalfBits(floatFromBits(0x7F800001u)), 0x7E00);     // signalling -> quiet
  EXPECT_EQ(floatToHalfBits(floatFromBits(0xFFC00000u)), 0xFE00);
  EXPECT_EQ(floatToHalfBits(floatFromBits(0x7F812345u)), 0x7E09);     // top payload bits kept
  EXPECT_EQ(halfBitsToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfBitsToFloat(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(floatBits(halfBitsToFloat(0x7C01)), 0x7FC02000u);
}

TEST(HalfKernelConversion, RandomFloatsMatchReference) {
  std::mt19937 rng(7);
  for (int i = 0; i < 400000; ++i) {
    // Exponents concentrated around the float16 range so every region gets hits.
    uint32_t bits = rng();
    bits = (bits & 0x807FFFFFu) | ((95u + (bits >> 23) % 50u) << 23);
    const float f = floatFromBits(bits);
    ASSERT_EQ(floatToHalfBits(f), kref::doubleToHalf(f)) << std::hex << bits;
  }
}

TEST(Bf16KernelConversion, WideningAndRoundTripForAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto b = static_cast<uint16_t>(h);
    const float f = bf16BitsToFloat(b);
    if (kref::bf16IsNan(b)) {
      ASSERT_EQ(floatBits(f), (h << 16) | 0x00400000u) << std::hex << h;
      ASSERT_EQ(floatToBf16Bits(f), b | 0x40) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), kref::bf16ToDouble(b)) << std::hex << h;
      ASSERT_EQ(floatToBf16Bits(f), b) << std::hex << h;
    }
  }
}

TEST(Bf16KernelConversion, EveryTieRoundsToEven) {
  for (uint32_t mag = 0; mag <= 0x7F7F; ++mag) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint32_t tie = ((sign | mag) << 16) | 0x8000u;
      const uint16_t lo = static_cast<uint16_t>(sign | mag), hi = static_cast<uint16_t>(sign | (mag + 1));
      ASSERT_EQ(floatToBf16Bits(floatFromBits(tie)), (mag & 1) ? hi : lo) << std::hex << mag;
      ASSERT_EQ(floatToBf16Bits(floatFromBits(tie - 1)), lo) << std::hex << mag;
      ASSERT_EQ(floatToBf16Bits(floatFromBits(tie + 1)), hi) << std::hex << mag;
    }
  }
}

TEST(Bf16KernelConversion, OverflowSubnormalsAndNan) {
  EXPECT_EQ(floatToBf16Bits(3.4028235e38f), 0x7F80);                 // FLT_MAX rounds up to inf
  EXPECT_EQ(floatToBf16Bits(floatFromBits(0x7F7F7FFFu)), 0x7F7F);
  EXPECT_EQ(floatToBf16Bits(-INFINITY), 0xFF80);
  EXPECT_EQ(floatToBf16Bits(floatFromBits(0x00008000u)), 0x0000);    // subnormal tie: even (0)
  EXPECT_EQ(floatToBf16Bits(floatFromBits(0x00018000u)), 0x0002);    // subnormal tie: even (2)
  EXPECT_EQ(floatToBf16Bits(floatFromBits(0x00010000u)), 0x0001);    // subnormals are kept
  EXPECT_EQ(floatToBf16Bits(floatFromBits(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(floatToBf16Bits(floatFromBits(0xFF812345u)), 0xFFC1);
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) {
    const float f = floatFromBits(rng());
    if (std::isnan(f)) continue;
    ASSERT_EQ(floatToBf16Bits(f), kref::doubleToBf16(f)) << std::hex << floatBits(f);
  }
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t hardwareToHalf(float f) {
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
__attribute__((target("f16c"))) float hardwareToFloat(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// The vector paths use F16C; the scalar path must agree with it bit for bit, NaN payloads included.
TEST(HalfKernelConversion, SoftwareMatchesF16cHardware) {
  if (!conflux::cpu::isaSupported(conflux::cpu::Isa::Avx2)) GTEST_SKIP() << "no F16C path on this CPU";
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(floatBits(halfBitsToFloat(static_cast<uint16_t>(h))), floatBits(hardwareToFloat(static_cast<uint16_t>(h))))
        << std::hex << h;
  std::mt19937 rng(3);
  for (int i = 0; i < 1000000; ++i) {
    uint32_t bits = rng();
    if (i % 2) bits = (bits & 0x807FFFFFu) | ((95u + (bits >> 23) % 50u) << 23);
    if (i % 5 == 0) bits = (bits & 0xFFFFE000u) | 0x1000u;  // a tie
    const float f = floatFromBits(bits);
    ASSERT_EQ(floatToHalfBits(f), hardwareToHalf(f)) << std::hex << bits;
  }
}
#endif

}  // namespace
