// conflux-perf: exact inputs and references for every collective, type and op (see check.h).
#include "check.h"

#include <cmath>
#include <cstring>

namespace cfxperf {

namespace {

uint16_t floatToHalf(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return sign | 0x7e00u;           // NaN
  if (mag >= 0x477ff000u) return sign | 0x7c00u;          // >= 65520 rounds to infinity
  if (mag < 0x38800000u) {                                // below 2^-14: subnormal half (or zero)
    float a;
    std::memcpy(&a, &mag, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));  // units of 2^-24, ties even
  }
  uint32_t h = ((((mag >> 23) - 127 + 15) << 10) | ((mag & 0x7fffffu) >> 13));
  const uint32_t rest = mag & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float halfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t mant = bits & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    float v = static_cast<float>(mant) / 16777216.0f;
    std::memcpy(&out, &v, 4);
    out |= sign;
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

uint16_t floatToBfloat16(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16ToFloat(uint16_t bits) {
  uint32_t x = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// How one datatype is stored and converted; values are small integers, exact in every type.
template <typename T>
struct Plain {
  using Store = T;
  static Store from(int64_t v) { return static_cast<T>(v); }  // integers wrap like the library's sums
  static double to(Store s) { return static_cast<double>(s); }
};
struct Half {
  using Store = uint16_t;
  static Store from(int64_t v) { return floatToHalf(static_cast<float>(v)); }
  static double to(Store s) { return halfToFloat(s); }
};
struct Bfloat16 {
  using Store = uint16_t;
  static Store from(int64_t v) { return floatToBfloat16(static_cast<float>(v)); }
  static double to(Store s) { return bfloat16ToFloat(s); }
};

template <typename F>
void withElem(cfxDataType_t type, F&& f) {
  switch (type) {
    case cfxInt8: f(Plain<int8_t>{}); break;
    case cfxUint8: f(Plain<uint8_t>{}); break;
    case cfxInt32: f(Plain<int32_t>{}); break;
    case cfxUint32: f(Plain<uint32_t>{}); break;
    case cfxInt64: f(Plain<int64_t>{}); break;
    case cfxUint64: f(Plain<uint64_t>{}); break;
    case cfxFloat16: f(Half{}); break;
    case cfxFloat32: f(Plain<float>{}); break;
    case cfxFloat64: f(Plain<double>{}); break;
    case cfxBfloat16: f(Bfloat16{}); break;
    default: break;
  }
}

bool reduces(Coll coll) {
  return coll == Coll::AllReduce || coll == Coll::ReduceScatter || coll == Coll::Reduce;
}

// Input element i of rank r.
int64_t inputValue(const CallShape& s, int r, size_t i) {
  const size_t n = static_cast<size_t>(s.nranks);
  const size_t ur = static_cast<size_t>(r);
  if (!reduces(s.coll)) return static_cast<int64_t>((ur * 31 + i) % 89);
  switch (s.op) {
    case cfxSum:
      return static_cast<int64_t>((ur + i) % 4);
    case cfxProd: {
      int64_t v = (ur == i % n) ? 2 : 1;
      if ((i / n) % 2 == 1 && ur == (i + 1) % n) v *= 2;
      return v;
    }
    case cfxMax:
    case cfxMin:
    case cfxBand:
    case cfxBor:
    case cfxBxor:
      return static_cast<int64_t>((ur * 3 + i) % 7);
    case cfxAvg: {
      // Offsets +1/-1 in pairs of ranks cancel, so the mean is exactly 1 + i % 3.
      int64_t d = (r % 2 == 1) ? -1 : (r + 1 < s.nranks ? 1 : 0);
      return 1 + static_cast<int64_t>(i % 3) + d;
    }
    default:
      return 0;
  }
}

int64_t reduced(const CallShape& s, size_t i) {
  int64_t acc = inputValue(s, 0, i);
  for (int q = 1; q < s.nranks; ++q) {
    int64_t v = inputValue(s, q, i);
    switch (s.op) {
      case cfxSum: case cfxAvg: acc += v; break;
      case cfxProd: acc *= v; break;
      case cfxMax: acc = v > acc ? v : acc; break;
      case cfxMin: acc = v < acc ? v : acc; break;
      case cfxBand: acc &= v; break;
      case cfxBor: acc |= v; break;
      case cfxBxor: acc ^= v; break;
      default: break;
    }
  }
  return s.op == cfxAvg ? acc / s.nranks : acc;
}

int64_t expectedValue(const CallShape& s, size_t k) {
  const size_t pc = s.counts.param;
  const int prev = (s.rank - 1 + s.nranks) % s.nranks;
  switch (s.coll) {
    case Coll::AllReduce:
    case Coll::Reduce:
      return reduced(s, k);
    case Coll::ReduceScatter:
      return reduced(s, static_cast<size_t>(s.rank) * pc + k);
    case Coll::AllGather:
      return inputValue(s, static_cast<int>(k / pc), k % pc);
    case Coll::AllToAll:
      return inputValue(s, static_cast<int>(k / pc), static_cast<size_t>(s.rank) * pc + k % pc);
    case Coll::Broadcast:
      return inputValue(s, s.root, k);
    case Coll::SendRecv:
      return inputValue(s, prev, k);
  }
  return 0;
}

}  // namespace

char* CallShape::send(char* sendbuf, char* recvbuf) const {
  if (!inPlace) return sendbuf;
  return recvbuf + counts.sendInplaceOffset * static_cast<size_t>(rank) * typeSize(type);
}

char* CallShape::recv(char* recvbuf) const {
  if (!inPlace) return recvbuf;
  return recvbuf + counts.recvInplaceOffset * static_cast<size_t>(rank) * typeSize(type);
}

void fillInputs(const CallShape& shape, char* sendbuf, char* recvbuf) {
  const size_t elt = typeSize(shape.type);
  char* result = shape.recv(recvbuf);
  if (!shape.inPlace) {
    std::memset(result, 0xff, shape.counts.recv * elt);
  } else if (shape.coll == Coll::AllGather) {
    std::memset(recvbuf, 0xff, shape.counts.recv * elt);  // the other ranks' blocks
  }
  char* input = shape.send(sendbuf, recvbuf);
  withElem(shape.type, [&](auto e) {
    using E = decltype(e);
    auto* p = reinterpret_cast<typename E::Store*>(input);
    for (size_t i = 0; i < shape.counts.send; ++i) p[i] = E::from(inputValue(shape, shape.rank, i));
  });
}

int64_t countWrong(const CallShape& shape, const char* recvbuf) {
  if (shape.coll == Coll::Reduce && shape.rank != shape.root) return 0;
  const char* result = shape.recv(const_cast<char*>(recvbuf));
  int64_t wrong = 0;
  withElem(shape.type, [&](auto e) {
    using E = decltype(e);
    const auto* p = reinterpret_cast<const typename E::Store*>(result);
    for (size_t k = 0; k < shape.counts.recv; ++k) {
      if (!(E::to(p[k]) == E::to(E::from(expectedValue(shape, k))))) ++wrong;
    }
  });
  return wrong;
}

}  // namespace cfxperf
