// Reference results for the multi-process collective tests. Inputs are small integers chosen so that every
// result is exact in every datatype (sums <= 8 * 5, products of 1s and 2s), so outputs are compared bit
// for bit; avg is the exact sum divided once, in float32 for the 16-bit types as the library specifies.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "conflux/conflux.h"

namespace conflux::testing {

/// Round-to-nearest-even float32 -> binary16 (inputs here are finite and in range).
inline uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

/// Round-to-nearest-even float32 -> bfloat16 (finite inputs).
inline uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t lsb = (x >> 16) & 1u;
  return static_cast<uint16_t>((x + 0x7fffu + lsb) >> 16);
}

inline size_t typeSize(cfxDataType_t t) {
  switch (t) {
    case cfxInt8: case cfxUint8: return 1;
    case cfxFloat16: case cfxBfloat16: return 2;
    case cfxInt32: case cfxUint32: case cfxFloat32: return 4;
    default: return 8;
  }
}

inline bool isUnsigned(cfxDataType_t t) { return t == cfxUint8 || t == cfxUint32 || t == cfxUint64; }
inline bool isFloat(cfxDataType_t t) {
  return t == cfxFloat16 || t == cfxBfloat16 || t == cfxFloat32 || t == cfxFloat64;
}

/// The sweep's stand-in for "a pre-multiplied sum" (each case creates one with cfxRedOpCreatePreMulSum).
inline constexpr cfxRedOp_t kPreMulSumCase = cfxMaxRedOp;

/// Rank r's PreMulSum scalar in the sweep: 1, 2 or 3, so that every result stays exact in every type.
inline int64_t premulScalar(int r) { return 1 + r % 3; }

/// Input element i of rank r for a test of (type, op); `reducing` false for pure data movement.
inline int64_t inputValue(cfxDataType_t t, cfxRedOp_t op, bool reducing, int r, uint64_t i) {
  if (!reducing) {
    int64_t v = static_cast<int64_t>((static_cast<uint64_t>(r) * 31 + i * 7) % 101);
    return isUnsigned(t) ? v : v - 50;
  }
  if (op == cfxProd) return ((static_cast<uint64_t>(r) + i) % 3 == 0) ? 2 : 1;
  int64_t v = static_cast<int64_t>((static_cast<uint64_t>(r) * 7 + i * 13) % 11);
  return isUnsigned(t) ? v : v - 5;
}

/// Writes integer-valued v into element i of buf as type t (integers wrap modulo their width).
inline void storeValue(cfxDataType_t t, void* buf, uint64_t i, int64_t v) {
  switch (t) {
    case cfxInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case cfxUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case cfxInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case cfxUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v); break;
    case cfxInt64: static_cast<int64_t*>(buf)[i] = v; break;
    case cfxUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(v); break;
    case cfxFloat16: static_cast<uint16_t*>(buf)[i] = floatToHalf(static_cast<float>(v)); break;
    case cfxBfloat16: static_cast<uint16_t*>(buf)[i] = floatToBf16(static_cast<float>(v)); break;
    case cfxFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    default: static_cast<double*>(buf)[i] = static_cast<double>(v); break;
  }
}

/// Writes the expected result of op over `vals` (the inputs of all ranks) into element i of buf.
inline void storeReduced(cfxDataType_t t, cfxRedOp_t op, void* buf, uint64_t i, const int64_t* vals, int n) {
  auto term = [&](int k) { return op == kPreMulSumCase ? vals[k] * premulScalar(k) : vals[k]; };
  int64_t acc = term(0);
  for (int k = 1; k < n; ++k) {
    switch (op) {
      case cfxProd: acc *= vals[k]; break;
      case cfxMax: acc = vals[k] > acc ? vals[k] : acc; break;
      case cfxMin: acc = vals[k] < acc ? vals[k] : acc; break;
      case cfxBand: acc &= vals[k]; break;  // on two's complement int64: truncation commutes with it
      case cfxBor: acc |= vals[k]; break;
      case cfxBxor: acc ^= vals[k]; break;
      default: acc += term(k); break;
    }
  }
  if (op != cfxAvg) {
    storeValue(t, buf, i, acc);
    return;
  }
  switch (t) {
    case cfxFloat16: static_cast<uint16_t*>(buf)[i] = floatToHalf(static_cast<float>(acc) / static_cast<float>(n)); break;
    case cfxBfloat16: static_cast<uint16_t*>(buf)[i] = floatToBf16(static_cast<float>(acc) / static_cast<float>(n)); break;
    case cfxFloat32: static_cast<float*>(buf)[i] = static_cast<float>(acc) / static_cast<float>(n); break;
    case cfxFloat64: static_cast<double*>(buf)[i] = static_cast<double>(acc) / n; break;
    default: storeValue(t, buf, i, acc / n); break;  // sums here never wrap: truncating division is exact
  }
}

/// Text of element i of buf, for failure messages.
inline std::string showValue(cfxDataType_t t, const void* buf, uint64_t i) {
  char s[64];
  switch (t) {
    case cfxInt8: snprintf(s, sizeof s, "%d", static_cast<const int8_t*>(buf)[i]); break;
    case cfxUint8: snprintf(s, sizeof s, "%u", static_cast<const uint8_t*>(buf)[i]); break;
    case cfxInt32: snprintf(s, sizeof s, "%d", static_cast<const int32_t*>(buf)[i]); break;
    case cfxUint32: snprintf(s, sizeof s, "%u", static_cast<const uint32_t*>(buf)[i]); break;
    case cfxInt64: snprintf(s, sizeof s, "%lld", static_cast<long long>(static_cast<const int64_t*>(buf)[i])); break;
    case cfxUint64:
      snprintf(s, sizeof s, "%llu", static_cast<unsigned long long>(static_cast<const uint64_t*>(buf)[i]));
      break;
    case cfxFloat16: case cfxBfloat16: snprintf(s, sizeof s, "0x%04x", static_cast<const uint16_t*>(buf)[i]); break;
    case cfxFloat32: snprintf(s, sizeof s, "%g", static_cast<double>(static_cast<const float*>(buf)[i])); break;
    default: snprintf(s, sizeof s, "%g", static_cast<const double*>(buf)[i]); break;
  }
  return s;
}

}  // namespace conflux::testing
