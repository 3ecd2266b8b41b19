// Every ISA path x datatype x op x nsrc x count against an independent scalar reference, with
// unaligned (element- and byte-offset) buffers, in-place aliasing and guard bytes around dst.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernel_reference.h"
#include "kernels/cpu/isa.h"

using conflux::DataType;
using conflux::RedOp;
using conflux::cpu::Isa;

namespace {

constexpr size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xA5;

// ---- value generation ----
template <class T>
T randomValue(std::mt19937_64& rng) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(rng());
  } else {
    // Mostly ordinary values with a spread of exponents; ~2% specials.
    const unsigned pick = static_cast<unsigned>(rng() % 100);
    if (pick < 2) {
      const T specials[] = {T(0.0), T(-0.0), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
                            std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::denorm_min(),
                            std::numeric_limits<T>::max(), -std::numeric_limits<T>::min()};
      return specials[rng() % 8];
    }
    const double mant = std::ldexp(static_cast<double>(rng() >> 11), -53) * 2 - 1;  // [-1, 1)
    return static_cast<T>(std::ldexp(mant, static_cast<int>(rng() % 21) - 10));
  }
}

/// Random 16-bit float patterns: every exponent (subnormals included), ~1.5% inf/NaN.
uint16_t random16(std::mt19937_64& rng, uint16_t expMask) {
  for (;;) {
    const auto b = static_cast<uint16_t>(rng());
    if ((b & expMask) != expMask || rng() % 64 == 0) return b;
  }
}

void fillRandom(DataType t, unsigned char* p, size_t n, std::mt19937_64& rng) {
  auto fill = [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < n; ++i) {
      const T v = randomValue<T>(rng);
      std::memcpy(p + i * sizeof(T), &v, sizeof(T));
    }
  };
  auto fill16 = [&](uint16_t expMask) {
    for (size_t i = 0; i < n; ++i) {
      const uint16_t v = random16(rng, expMask);
      std::memcpy(p + i * 2, &v, 2);
    }
  };
  switch (t) {
    case DataType::Int8: return fill(int8_t{});
    case DataType::Uint8: return fill(uint8_t{});
    case DataType::Int32: return fill(int32_t{});
    case DataType::Uint32: return fill(uint32_t{});
    case DataType::Int64: return fill(int64_t{});
    case DataType::Uint64: return fill(uint64_t{});
    case DataType::Float32: return fill(float{});
    case DataType::Float64: return fill(double{});
    case DataType::Float16: return fill16(0x7C00);
    case DataType::Bfloat16: return fill16(0x7F80);
  }
}

// ---- reference reduction (element by element, sources in order) ----
template <class T>
T refIntOp(RedOp op, T a, T b) {
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case RedOp::Sum: case RedOp::Avg: case RedOp::PreMulSum: return static_cast<T>(ua + ub);  // mod 2^64, truncated
    case RedOp::Prod: return static_cast<T>(ua * ub);
    case RedOp::Max: return a > b ? a : b;
    case RedOp::Min: return a < b ? a : b;
    case RedOp::Band: return static_cast<T>(ua & ub);
    case RedOp::Bor: return static_cast<T>(ua | ub);
    case RedOp::Bxor: return static_cast<T>(ua ^ ub);
  }
  return a;
}

template <class F>
F refFloatOp(RedOp op, F a, F b) {
  switch (op) {
    case RedOp::Sum: case RedOp::Avg: case RedOp::PreMulSum: return a + b;
    case RedOp::Prod: return a * b;
    case RedOp::Max: return kref::maximum(a, b);
    case RedOp::Min: return kref::minimum(a, b);
    case RedOp::Band: case RedOp::Bor: case RedOp::Bxor: break;  // integers only: never asked
  }
  return a;
}

/// Calls gen(T{}) for the integer and 32/64-bit float types, or half(decode, encode) for the 16-bit floats.
template <class Gen, class Half>
void onType(DataType t, Gen&& gen, Half&& half) {
  switch (t) {
    case DataType::Int8: return gen(int8_t{});
    case DataType::Uint8: return gen(uint8_t{});
    case DataType::Int32: return gen(int32_t{});
    case DataType::Uint32: return gen(uint32_t{});
    case DataType::Int64: return gen(int64_t{});
    case DataType::Uint64: return gen(uint64_t{});
    case DataType::Float32: return gen(float{});
    case DataType::Float64: return gen(double{});
    case DataType::Float16: return half(kref::cachedDecode<kref::halfToDouble>, kref::doubleToHalf);
    case DataType::Bfloat16: return half(kref::cachedDecode<kref::bf16ToDouble>, kref::doubleToBf16);
  }
}

/// Reference for element i written into `out` (sizeof element bytes).
void refElement(DataType t, RedOp op, const std::vector<const unsigned char*>& srcs, size_t i, unsigned char* out) {
  auto gen = [&](auto tag) {
    using T = decltype(tag);
    T acc = kref::bitsOf<T>(srcs[0] + i * sizeof(T));
    for (size_t k = 1; k < srcs.size(); ++k) {
      const T v = kref::bitsOf<T>(srcs[k] + i * sizeof(T));
      if constexpr (std::is_integral_v<T>) acc = refIntOp(op, acc, v);
      else acc = refFloatOp(op, acc, v);
    }
    std::memcpy(out, &acc, sizeof(T));
  };
  auto half = [&](double (*decode)(uint16_t), uint16_t (*encode)(double)) {
    float acc = static_cast<float>(decode(kref::bitsOf<uint16_t>(srcs[0] + i * 2)));
    for (size_t k = 1; k < srcs.size(); ++k)
      acc = refFloatOp(op, acc, static_cast<float>(decode(kref::bitsOf<uint16_t>(srcs[k] + i * 2))));
    const uint16_t r = encode(acc);
    std::memcpy(out, &r, 2);
  };
  onType(t, gen, half);
}

/// Equal bits, or both NaN.
bool sameElement(DataType t, const unsigned char* a, const unsigned char* b) {
  switch (t) {
    case DataType::Float32: {
      const float x = kref::bitsOf<float>(a), y = kref::bitsOf<float>(b);
      if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
      break;
    }
    case DataType::Float64: {
      const double x = kref::bitsOf<double>(a), y = kref::bitsOf<double>(b);
      if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
      break;
    }
    case DataType::Float16: case DataType::Bfloat16: {
      const auto x = kref::bitsOf<uint16_t>(a), y = kref::bitsOf<uint16_t>(b);
      auto isNan = t == DataType::Float16 ? kref::halfIsNan : kref::bf16IsNan;
      if (isNan(x) || isNan(y)) return isNan(x) && isNan(y);
      break;
    }
    default:
      break;
  }
  return std::memcmp(a, b, conflux::dataTypeSize(t)) == 0;
}

// ---- the parameterised test ----
enum class Layout { OutOfPlace, InPlaceFirst, InPlaceLastByteOffset };

using Param = std::tuple<Isa, DataType, RedOp>;

bool fail(int nsrc, size_t count, Layout layout, const std::string& what) {
  ADD_FAILURE() << "nsrc=" << nsrc << " count=" << count << " layout=" << static_cast<int>(layout) << ": " << what;
  return false;
}

/// Runs one case of kernel (isa, type, op); returns false (after recording a failure) on the first
/// mismatch.
bool runCase(const Param& param, int nsrc, size_t count, Layout layout, std::mt19937_64& rng) {
  const auto [isa, type, op] = param;
  const size_t es = conflux::dataTypeSize(type);
  const size_t bytes = count * es;
  const size_t byteOffset = layout == Layout::InPlaceLastByteOffset ? 1 : 0;
  std::vector<std::vector<unsigned char>> store(nsrc + 1);
  std::vector<unsigned char*> bufs(nsrc + 1);
  for (int k = 0; k <= nsrc; ++k) {
    // Element offsets that differ per buffer, so sources and dst are misaligned to each other.
    const size_t elemOffset = static_cast<size_t>(k * 3 + static_cast<int>(count)) % 5;
    store[k].assign(bytes + 2 * kGuard + 8 * es, kGuardByte);
    bufs[k] = store[k].data() + kGuard + elemOffset * es + byteOffset;
    if (k < nsrc) fillRandom(type, bufs[k], count, rng);
  }
  std::vector<const unsigned char*> srcView(bufs.begin(), bufs.begin() + nsrc);
  std::vector<unsigned char> expected(bytes);
  if (nsrc == 1) {
    if (bytes) std::memcpy(expected.data(), bufs[0], bytes);  // a copy, bit for bit
  } else {
    for (size_t i = 0; i < count; ++i) refElement(type, op, srcView, i, expected.data() + i * es);
  }
  const int dstIndex = layout == Layout::OutOfPlace ? nsrc : layout == Layout::InPlaceFirst ? 0 : nsrc - 1;
  unsigned char* dst = bufs[dstIndex];
  const std::vector<unsigned char> before = store[dstIndex];
  const size_t dstStart = static_cast<size_t>(dst - store[dstIndex].data());
  std::vector<const void*> srcPtrs(srcView.begin(), srcView.end());
  conflux::cpu::ReduceFn fn = conflux::cpu::reduceFunction(isa, type, op);
  EXPECT_NE(fn, nullptr);
  if (fn == nullptr) return false;
  fn(dst, srcPtrs.data(), nsrc, count);

  const std::vector<unsigned char>& after = store[dstIndex];
  for (size_t b = 0; b < dstStart; ++b)
    if (after[b] != before[b]) return fail(nsrc, count, layout, "wrote before dst");
  for (size_t b = dstStart + bytes; b < after.size(); ++b)
    if (after[b] != before[b]) return fail(nsrc, count, layout, "wrote past dst + count");
  for (size_t i = 0; i < count; ++i) {
    if (!sameElement(type, dst + i * es, expected.data() + i * es)) {
      char msg[160];
      uint64_t got = 0, want = 0;
      std::memcpy(&got, dst + i * es, es);
      std::memcpy(&want, expected.data() + i * es, es);
      std::snprintf(msg, sizeof msg, "element %zu: got 0x%llx want 0x%llx", i,
                    static_cast<unsigned long long>(got), static_cast<unsigned long long>(want));
      return fail(nsrc, count, layout, msg);
    }
  }
  return true;
}

class ReduceKernelTest : public ::testing::TestWithParam<Param> {};

TEST_P(ReduceKernelTest, MatchesReference) {
  const auto [isa, type, op] = GetParam();
  if (!conflux::cpu::isaSupported(isa)) GTEST_SKIP() << conflux::cpu::isaName(isa) << " not supported here";
  std::mt19937_64 rng(static_cast<uint64_t>(static_cast<int>(type) * 131 + static_cast<int>(op) * 7 + 1));
  const int nsrcs[] = {1, 2, 3, 5, 8, 16, 33};
  const size_t counts[] = {0, 1, 7, 15, 16, 17, 63, 64, 65, 1000, 4099};
  for (int nsrc : nsrcs)
    for (size_t count : counts)
      for (Layout layout : {Layout::OutOfPlace, Layout::InPlaceFirst, Layout::InPlaceLastByteOffset})
        if (!runCase(GetParam(), nsrc, count, layout, rng)) return;
}

// The parameter lists the suites combine.
auto everyPath() { return ::testing::Values(Isa::Scalar, Isa::Avx2, Isa::Avx512); }
auto everyType() {
  return ::testing::Values(DataType::Int8, DataType::Uint8, DataType::Int32, DataType::Uint32, DataType::Int64,
                           DataType::Uint64, DataType::Float16, DataType::Float32, DataType::Float64,
                           DataType::Bfloat16);
}
auto integerTypes() {
  return ::testing::Values(DataType::Int8, DataType::Uint8, DataType::Int32, DataType::Uint32, DataType::Int64,
                           DataType::Uint64);
}
auto arithmeticOps() { return ::testing::Values(RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg); }
auto bitwiseOps() { return ::testing::Values(RedOp::Band, RedOp::Bor, RedOp::Bxor); }

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  const auto [isa, type, op] = info.param;
  return std::string(conflux::cpu::isaName(isa)) + "_" + std::string(conflux::dataTypeName(type)) + "_" +
         std::string(conflux::redOpName(op));
}

INSTANTIATE_TEST_SUITE_P(
    AllPaths, ReduceKernelTest,
    ::testing::Combine(everyPath(), everyType(), arithmeticOps()),
    paramName);

// The bitwise ops, on the integer types only.
INSTANTIATE_TEST_SUITE_P(
    Bitwise, ReduceKernelTest,
    ::testing::Combine(everyPath(), integerTypes(), bitwiseOps()),
    paramName);

TEST(ReduceKernelBitwise, NoKernelForFloatingTypes) {
  for (DataType t : {DataType::Float16, DataType::Float32, DataType::Float64, DataType::Bfloat16}) {
    for (RedOp op : {RedOp::Band, RedOp::Bor, RedOp::Bxor}) EXPECT_EQ(conflux::cpu::reduceFunction(t, op), nullptr);
  }
}

// ---- PreMulSum: sources whose mask bit is set are multiplied by the scalar as they are read ----
/// Reference of element i: the accumulator-type products and sums, in source order, rounded once.
void refPremulElement(DataType t, const std::vector<const unsigned char*>& srcs, uint64_t mask, const void* scalar,
                      size_t i, unsigned char* out) {
  auto scaledAt = [&](size_t k) { return k < 64 && ((mask >> k) & 1u) != 0; };
  auto gen = [&](auto tag) {
    using T = decltype(tag);
    const T s = kref::bitsOf<T>(scalar);
    auto term = [&](size_t k) {
      const T v = kref::bitsOf<T>(srcs[k] + i * sizeof(T));
      if constexpr (std::is_integral_v<T>) return scaledAt(k) ? refIntOp(RedOp::Prod, v, s) : v;
      else return scaledAt(k) ? static_cast<T>(v * s) : v;
    };
    T acc = term(0);
    for (size_t k = 1; k < srcs.size(); ++k) {
      if constexpr (std::is_integral_v<T>) acc = refIntOp(RedOp::Sum, acc, term(k));
      else acc = static_cast<T>(acc + term(k));
    }
    std::memcpy(out, &acc, sizeof(T));
  };
  auto half = [&](double (*decode)(uint16_t), uint16_t (*encode)(double)) {
    const float s = static_cast<float>(decode(kref::bitsOf<uint16_t>(scalar)));
    auto term = [&](size_t k) {
      const float v = static_cast<float>(decode(kref::bitsOf<uint16_t>(srcs[k] + i * 2)));
      return scaledAt(k) ? static_cast<float>(v * s) : v;
    };
    float acc = term(0);
    for (size_t k = 1; k < srcs.size(); ++k) acc = static_cast<float>(acc + term(k));
    const uint16_t r = encode(acc);
    std::memcpy(out, &r, 2);
  };
  onType(t, gen, half);
}

using PremulParam = std::tuple<Isa, DataType>;

std::string premulName(const ::testing::TestParamInfo<PremulParam>& p) {
  return std::string(conflux::cpu::isaName(std::get<0>(p.param))) + "_" +
         std::string(conflux::dataTypeName(std::get<1>(p.param)));
}

class PremulKernelTest : public ::testing::TestWithParam<PremulParam> {};

TEST_P(PremulKernelTest, MatchesReference) {
  const auto [isa, type] = GetParam();
  if (!conflux::cpu::isaSupported(isa)) GTEST_SKIP() << conflux::cpu::isaName(isa) << " not supported here";
  const conflux::cpu::PremulFn fn = conflux::cpu::premulSumFunction(isa, type);
  ASSERT_NE(fn, nullptr);
  std::mt19937_64 rng(static_cast<uint64_t>(static_cast<int>(type) * 977 + 5));
  const size_t es = conflux::dataTypeSize(type);
  for (int nsrc : {1, 2, 3, 9}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{17}, size_t{300}, size_t{4099}}) {
      for (uint64_t mask : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{5}, ~uint64_t{0}}) {
        for (bool inPlace : {false, true}) {
          std::vector<std::vector<unsigned char>> store(nsrc + 1);
          for (int k = 0; k <= nsrc; ++k) {
            store[k].assign(count * es + 2 * kGuard, kGuardByte);
            if (k < nsrc) fillRandom(type, store[k].data() + kGuard + (k % 2), count, rng);
          }
          std::vector<const unsigned char*> srcs;
          for (int k = 0; k < nsrc; ++k) srcs.push_back(store[k].data() + kGuard + (k % 2));
          unsigned char scalar[8];
          fillRandom(type, scalar, 1, rng);
          std::vector<unsigned char> want(count * es);
          for (size_t i = 0; i < count; ++i) refPremulElement(type, srcs, mask, scalar, i, want.data() + i * es);
          unsigned char* dst = inPlace ? const_cast<unsigned char*>(srcs[0]) : store[nsrc].data() + kGuard;
          std::vector<const void*> ptrs(srcs.begin(), srcs.end());
          fn(dst, ptrs.data(), nsrc, count, mask, scalar);
          for (size_t i = 0; i < count; ++i) {
            if (!sameElement(type, dst + i * es, want.data() + i * es)) {
              FAIL() << "nsrc=" << nsrc << " count=" << count << " mask=" << mask << " in-place=" << inPlace
                     << ": element " << i << " differs";
            }
          }
          const std::vector<unsigned char>& out = store[inPlace ? 0 : nsrc];
          const size_t end = (dst - out.data()) + count * es;
          for (size_t b = 0; b < static_cast<size_t>(dst - out.data()); ++b) ASSERT_EQ(out[b], kGuardByte) << "wrote before dst";
          for (size_t b = end; b < out.size(); ++b) ASSERT_EQ(out[b], kGuardByte) << "wrote past dst + count";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllPaths, PremulKernelTest,
    ::testing::Combine(everyPath(), everyType()),
    premulName);

// Results of at least 1 MiB, out of place, take the non-temporal store path (with a scalar head
// that aligns dst); in place and byte-misaligned ones take the plain path.
class ReduceKernelLargeTest : public ::testing::TestWithParam<Param> {};

TEST_P(ReduceKernelLargeTest, MatchesReference) {
  const auto [isa, type, op] = GetParam();
  if (!conflux::cpu::isaSupported(isa)) GTEST_SKIP() << conflux::cpu::isaName(isa) << " not supported here";
  std::mt19937_64 rng(static_cast<uint64_t>(static_cast<int>(type) + 1000));
  const size_t count = (size_t{1} << 20) / conflux::dataTypeSize(type) + 77;
  for (int nsrc : {2, 3})
    for (Layout layout : {Layout::OutOfPlace, Layout::InPlaceLastByteOffset})
      if (!runCase(GetParam(), nsrc, count, layout, rng)) return;
}

INSTANTIATE_TEST_SUITE_P(
    AllPaths, ReduceKernelLargeTest,
    ::testing::Combine(everyPath(),
                       ::testing::Values(DataType::Int8, DataType::Uint32, DataType::Int64, DataType::Float16,
                                         DataType::Float32, DataType::Float64, DataType::Bfloat16),
                       ::testing::Values(RedOp::Sum, RedOp::Max)),
    paramName);

// ---- reduceStreamingTo: one reduction, several destinations ----
// Destinations that share their alignment modulo 64 take the one-pass streaming kernel (where the path
// vectorises the op), a destination that is a source too; mixed alignments, byte offsets and more than
// kMaxFanout destinations take the reduce-then-copy path. Every destination must hold the
// reference result and nothing around it may change.
enum class Fan { SameAlignment, MixedAlignment, ByteOffset, DestinationIsASource };

bool runFanout(const Param& param, int nsrc, int ndst, size_t count, Fan fan, std::mt19937_64& rng) {
  const auto [isa, type, op] = param;
  const size_t es = conflux::dataTypeSize(type), bytes = count * es;
  auto where = [&](const std::string& what) {
    ADD_FAILURE() << "nsrc=" << nsrc << " ndst=" << ndst << " count=" << count << " case=" << static_cast<int>(fan)
                  << ": " << what;
    return false;
  };
  // Buffer k starts at a 64-byte boundary plus a per-case shift, inside guard bytes.
  auto shiftOf = [&](int k) -> size_t {
    switch (fan) {
      case Fan::SameAlignment: return 3 * es;
      case Fan::MixedAlignment: return static_cast<size_t>(k % 3) * es;
      case Fan::ByteOffset: return 1;
      case Fan::DestinationIsASource: return 2 * es;  // a head before the first aligned line
    }
    return 0;
  };
  const int nbuf = nsrc + ndst;
  std::vector<std::vector<unsigned char>> store(static_cast<size_t>(nbuf));
  std::vector<unsigned char*> at(static_cast<size_t>(nbuf));
  for (int k = 0; k < nbuf; ++k) {
    store[k].assign(bytes + 3 * kGuard + 64, kGuardByte);
    const uintptr_t base = reinterpret_cast<uintptr_t>(store[k].data()) + kGuard;
    at[k] = reinterpret_cast<unsigned char*>((base + 63) / 64 * 64) + shiftOf(k);
    if (k < nsrc) fillRandom(type, at[k], count, rng);
  }
  std::vector<const unsigned char*> srcs(at.begin(), at.begin() + nsrc);
  std::vector<unsigned char> want(bytes);
  if (nsrc == 1) {
    if (bytes) std::memcpy(want.data(), srcs[0], bytes);
  } else {
    for (size_t i = 0; i < count; ++i) refElement(type, op, srcs, i, want.data() + i * es);
  }
  std::vector<void*> dsts(at.begin() + nsrc, at.end());
  if (fan == Fan::DestinationIsASource) dsts[static_cast<size_t>(ndst - 1)] = at[static_cast<size_t>(nsrc - 1)];
  const std::vector<std::vector<unsigned char>> before = store;
  std::vector<const void*> srcPtrs(srcs.begin(), srcs.end());
  conflux::cpu::reduceStreamingTo(type, op, dsts.data(), ndst, srcPtrs.data(), nsrc, count);
  for (int k = 0; k < nbuf; ++k) {
    const bool isDst = k >= nsrc || (fan == Fan::DestinationIsASource && k == nsrc - 1);
    const size_t start = static_cast<size_t>(at[k] - store[k].data());
    for (size_t b = 0; b < store[k].size(); ++b) {
      const bool inside = b >= start && b < start + bytes;
      if (inside && isDst) continue;
      if (store[k][b] != before[k][b]) return where("buffer " + std::to_string(k) + " changed at byte " + std::to_string(b));
    }
  }
  for (int d = 0; d < ndst; ++d) {
    const auto* got = static_cast<const unsigned char*>(dsts[d]);
    for (size_t i = 0; i < count; ++i) {
      if (!sameElement(type, got + i * es, want.data() + i * es)) {
        return where("destination " + std::to_string(d) + " element " + std::to_string(i) + " differs");
      }
    }
  }
  return true;
}

class ReduceFanoutTest : public ::testing::TestWithParam<Param> {};

TEST_P(ReduceFanoutTest, EveryDestinationMatchesTheReference) {
  const auto [isa, type, op] = GetParam();
  if (!conflux::cpu::isaSupported(isa)) GTEST_SKIP() << conflux::cpu::isaName(isa) << " not supported here";
  const Isa active = conflux::cpu::activeIsa();
  ASSERT_TRUE(conflux::cpu::forceIsa(isa));
  std::mt19937_64 rng(static_cast<uint64_t>(static_cast<int>(type) * 17 + static_cast<int>(op) + 5));
  bool ok = true;
  for (int nsrc : {1, 2, 3}) {
    for (int ndst : {1, 2, 3, conflux::cpu::kMaxFanout, conflux::cpu::kMaxFanout + 1}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{15}, size_t{17}, size_t{65}, size_t{1000}, size_t{4099}}) {
        for (Fan fan : {Fan::SameAlignment, Fan::MixedAlignment, Fan::ByteOffset, Fan::DestinationIsASource}) {
          if (ok) ok = runFanout(GetParam(), nsrc, ndst, count, fan, rng);
        }
      }
    }
  }
  conflux::cpu::forceIsa(active);
}

INSTANTIATE_TEST_SUITE_P(
    AllPaths, ReduceFanoutTest,
    ::testing::Combine(everyPath(), everyType(), arithmeticOps()),
    paramName);

INSTANTIATE_TEST_SUITE_P(
    Bitwise, ReduceFanoutTest,
    ::testing::Combine(everyPath(), integerTypes(), bitwiseOps()),
    paramName);

}  // namespace
