// Independent reference arithmetic for the kernel tests: 16-bit float decoding/encoding written from
// the format definitions (a value table and a binary search, no bit tricks shared with kernels/half.h),
// and IEEE 754-2019 minimum/maximum written from the standard's wording.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace kref {

/// Value of a float16 bit pattern (NaN for NaNs).
inline double halfToDouble(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  double v;
  if (exp == 0x1F) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exp == 0) v = std::ldexp(mant, -24);
  else v = std::ldexp(1024 + mant, exp - 25);
  return sign ? -v : v;
}

/// Value of a bfloat16 bit pattern (NaN for NaNs).
inline double bf16ToDouble(uint16_t b) {
  const int sign = b >> 15, exp = (b >> 7) & 0xFF, mant = b & 0x7F;
  double v;
  if (exp == 0xFF) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exp == 0) v = std::ldexp(mant, -133);
  else v = std::ldexp(128 + mant, exp - 134);
  return sign ? -v : v;
}

/// decode() of every 16-bit pattern, computed once (the reference reductions decode millions).
template <double (*Decode)(uint16_t)>
double cachedDecode(uint16_t b) {
  static const std::vector<double> all = [] {
    std::vector<double> v(65536);
    for (uint32_t i = 0; i < 65536; ++i) v[i] = Decode(static_cast<uint16_t>(i));
    return v;
  }();
  return all[b];
}

/// Values of the positive finite patterns 0..maxFinite, which increase with the pattern (true of
/// float16 and bfloat16).
inline std::vector<double> positiveValues(double (*decode)(uint16_t), uint16_t maxFinite) {
  std::vector<double> v(maxFinite + 1u);
  for (uint32_t b = 0; b <= maxFinite; ++b) v[b] = decode(static_cast<uint16_t>(b));
  return v;
}

/// Round v to nearest of a 16-bit format given its positive finite values, ties to the even pattern;
/// pattern maxFinite + 1 is +inf, reached when |v| >= overflowBound (max finite + half an ulp).
/// NaN gives nanBits.
inline uint16_t roundTo16(double v, const std::vector<double>& values, double overflowBound, uint16_t nanBits) {
  if (std::isnan(v)) return nanBits;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  const size_t maxFinite = values.size() - 1;
  size_t r;
  if (a >= overflowBound) {
    r = maxFinite + 1;  // +inf
  } else {
    const size_t lo = static_cast<size_t>(std::upper_bound(values.begin(), values.end(), a) - values.begin()) - 1;
    const double below = values[lo];
    // Past the max finite value the next pattern is inf, which rounds like max + one ulp.
    const double above = lo == maxFinite ? 2 * overflowBound - below : values[lo + 1];
    const double dBelow = a - below, dAbove = above - a;
    r = (dBelow < dAbove || (dBelow == dAbove && (lo & 1) == 0)) ? lo : lo + 1;
  }
  return static_cast<uint16_t>(sign | r);
}

inline uint16_t doubleToHalf(double v) {
  static const std::vector<double> values = positiveValues(halfToDouble, 0x7BFF);
  return roundTo16(v, values, 65520.0, 0x7E00);
}
inline uint16_t doubleToBf16(double v) {
  // max bfloat16 = (2 - 2^-7) * 2^127; the overflow bound adds half an ulp (2^119).
  static const std::vector<double> values = positiveValues(bf16ToDouble, 0x7F7F);
  return roundTo16(v, values, std::ldexp(255.0 / 128 + 1.0 / 256, 127), 0x7FC0);
}

inline bool halfIsNan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0; }
inline bool bf16IsNan(uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0; }

/// IEEE 754-2019 maximum: NaN if either is NaN; +0 is greater than -0.
template <class F>
F maximum(F a, F b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<F>::quiet_NaN();
  if (a == 0 && b == 0) return (std::signbit(a) && std::signbit(b)) ? F(-0.0) : F(0.0);
  return a > b ? a : b;
}

/// IEEE 754-2019 minimum: NaN if either is NaN; -0 is less than +0.
template <class F>
F minimum(F a, F b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<F>::quiet_NaN();
  if (a == 0 && b == 0) return (std::signbit(a) || std::signbit(b)) ? F(-0.0) : F(0.0);
  return a < b ? a : b;
}

template <class T>
T bitsOf(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace kref
