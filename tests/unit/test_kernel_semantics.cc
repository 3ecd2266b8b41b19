// Edge-case semantics of the CPU kernels on every ISA path: IEEE 754-2019 min/max with NaN, inf and
// signed zeros; integer wrap-around; float32 accumulation of 16-bit floats; every float16/bfloat16
// pattern through the vector conversions; divideInPlace; copy; and the dispatcher itself.
#include <gtest/gtest.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernel_reference.h"
#include "kernels/cpu/isa.h"

using conflux::DataType;
using conflux::RedOp;
using conflux::cpu::Isa;

namespace {

/// Runs the (isa, type, op) kernel over equally long sources and returns the result.
template <class T>
std::vector<T> reduce(Isa isa, DataType type, RedOp op, const std::vector<std::vector<T>>& srcs) {
  std::vector<const void*> ptrs;
  for (const auto& s : srcs) ptrs.push_back(s.data());
  std::vector<T> out(srcs[0].size());
  conflux::cpu::reduceFunction(isa, type, op)(out.data(), ptrs.data(), static_cast<int>(srcs.size()), out.size());
  return out;
}

/// Two sources holding every ordered pair (a, b) of `values`, repeated to cover vector body and tail.
template <class T>
std::vector<std::vector<T>> allPairs(const std::vector<T>& values) {
  std::vector<std::vector<T>> srcs(2);
  for (int rep = 0; rep < 3; ++rep)
    for (T a : values)
      for (T b : values) {
        srcs[0].push_back(a);
        srcs[1].push_back(b);
      }
  return srcs;
}

class ReduceKernelSemantics : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!conflux::cpu::isaSupported(GetParam())) GTEST_SKIP() << conflux::cpu::isaName(GetParam()) << " not supported here";
  }
};

template <class F, class Bits>
void checkFloatMinMax(Isa isa, DataType type) {
  const F nan = std::numeric_limits<F>::quiet_NaN(), inf = std::numeric_limits<F>::infinity();
  const F snan = std::numeric_limits<F>::signaling_NaN();
  const std::vector<F> values = {nan, -nan, snan, inf, -inf, F(0.0), F(-0.0), F(1), F(-1),
                                 std::numeric_limits<F>::denorm_min(), F(-2.5), std::numeric_limits<F>::max()};
  const auto srcs = allPairs(values);
  const Bits quietBit = Bits{1} << (std::numeric_limits<F>::digits - 2);
  for (RedOp op : {RedOp::Max, RedOp::Min}) {
    const auto out = reduce(isa, type, op, srcs);
    for (size_t i = 0; i < out.size(); ++i) {
      const F a = srcs[0][i], b = srcs[1][i];
      const F want = op == RedOp::Max ? kref::maximum(a, b) : kref::minimum(a, b);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(out[i])) << i;
        ASSERT_NE(kref::bitsOf<Bits>(&out[i]) & quietBit, Bits{0}) << "NaN result must be quiet, " << i;
      } else {
        ASSERT_EQ(kref::bitsOf<Bits>(&out[i]), kref::bitsOf<Bits>(&want)) << "op " << static_cast<int>(op) << " a=" << a << " b=" << b;
      }
    }
  }
}

TEST_P(ReduceKernelSemantics, Float32MinMaxFollowIeee2019) { checkFloatMinMax<float, uint32_t>(GetParam(), DataType::Float32); }
TEST_P(ReduceKernelSemantics, Float64MinMaxFollowIeee2019) { checkFloatMinMax<double, uint64_t>(GetParam(), DataType::Float64); }

void checkHalfMinMax(Isa isa, DataType type, const std::vector<uint16_t>& values, double (*decode)(uint16_t),
                     uint16_t (*encode)(double), bool (*isNan)(uint16_t), uint16_t quietBit) {
  const auto srcs = allPairs(values);
  for (RedOp op : {RedOp::Max, RedOp::Min}) {
    const auto out = reduce(isa, type, op, srcs);
    for (size_t i = 0; i < out.size(); ++i) {
      const double a = decode(srcs[0][i]), b = decode(srcs[1][i]);
      const double want = op == RedOp::Max ? kref::maximum(a, b) : kref::minimum(a, b);
      if (std::isnan(want)) {
        ASSERT_TRUE(isNan(out[i])) << std::hex << out[i];
        ASSERT_TRUE(out[i] & quietBit) << std::hex << out[i];
      } else {
        ASSERT_EQ(out[i], encode(want)) << std::hex << srcs[0][i] << " " << srcs[1][i];
      }
    }
  }
}

TEST_P(ReduceKernelSemantics, Float16MinMaxFollowIeee2019) {
  checkHalfMinMax(GetParam(), DataType::Float16,
                  {0x7E00, 0xFE00, 0x7C01, 0x7C00, 0xFC00, 0x0000, 0x8000, 0x3C00, 0xBC00, 0x0001, 0x7BFF, 0xFBFF},
                  kref::halfToDouble, kref::doubleToHalf, kref::halfIsNan, 0x0200);
}

TEST_P(ReduceKernelSemantics, Bfloat16MinMaxFollowIeee2019) {
  checkHalfMinMax(GetParam(), DataType::Bfloat16,
                  {0x7FC0, 0xFFC0, 0x7F81, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x3F80, 0xBF80, 0x0001, 0x7F7F, 0xFF7F},
                  kref::bf16ToDouble, kref::doubleToBf16, kref::bf16IsNan, 0x0040);
}

TEST_P(ReduceKernelSemantics, NanInOneOfManySourcesPropagates) {
  std::vector<std::vector<float>> srcs(8, std::vector<float>(100, 1.0f));
  for (size_t i = 0; i < 100; i += 3) srcs[5][i] = std::numeric_limits<float>::quiet_NaN();
  for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min}) {
    const auto out = reduce(GetParam(), DataType::Float32, op, srcs);
    for (size_t i = 0; i < 100; ++i) ASSERT_EQ(std::isnan(out[i]), i % 3 == 0) << i;
  }
}

template <class T>
void checkWrap(Isa isa, DataType type, RedOp op, T a, T b, T want) {
  const auto out = reduce<T>(isa, type, op, {std::vector<T>(70, a), std::vector<T>(70, b)});
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], want) << i;
}

TEST_P(ReduceKernelSemantics, IntegersWrapAround) {
  const Isa isa = GetParam();
  checkWrap<int8_t>(isa, DataType::Int8, RedOp::Sum, 127, 1, -128);
  checkWrap<int8_t>(isa, DataType::Int8, RedOp::Prod, -128, -1, -128);
  checkWrap<int8_t>(isa, DataType::Int8, RedOp::Prod, 16, 16, 0);
  checkWrap<uint8_t>(isa, DataType::Uint8, RedOp::Sum, 255, 1, 0);
  checkWrap<uint8_t>(isa, DataType::Uint8, RedOp::Prod, 255, 255, 1);
  checkWrap<int32_t>(isa, DataType::Int32, RedOp::Sum, INT32_MAX, 1, INT32_MIN);
  checkWrap<int32_t>(isa, DataType::Int32, RedOp::Prod, INT32_MIN, -1, INT32_MIN);
  checkWrap<int32_t>(isa, DataType::Int32, RedOp::Prod, 65536, 65536, 0);
  checkWrap<uint32_t>(isa, DataType::Uint32, RedOp::Sum, UINT32_MAX, 2, 1);
  checkWrap<uint32_t>(isa, DataType::Uint32, RedOp::Prod, 0x80000001u, 2, 2);
  checkWrap<int64_t>(isa, DataType::Int64, RedOp::Sum, INT64_MAX, 1, INT64_MIN);
  checkWrap<int64_t>(isa, DataType::Int64, RedOp::Prod, INT64_MAX, 3, INT64_MAX - 2);
  checkWrap<int64_t>(isa, DataType::Int64, RedOp::Prod, int64_t{1} << 32, int64_t{1} << 32, 0);
  checkWrap<uint64_t>(isa, DataType::Uint64, RedOp::Sum, UINT64_MAX, UINT64_MAX, UINT64_MAX - 1);
  checkWrap<uint64_t>(isa, DataType::Uint64, RedOp::Prod, UINT64_MAX, UINT64_MAX, 1);
  checkWrap<uint64_t>(isa, DataType::Uint64, RedOp::Max, UINT64_MAX, 1, UINT64_MAX);  // unsigned compare
  checkWrap<uint64_t>(isa, DataType::Uint64, RedOp::Min, UINT64_MAX, 1, 1);
  checkWrap<int64_t>(isa, DataType::Int64, RedOp::Min, INT64_MIN, 1, INT64_MIN);
  checkWrap<uint32_t>(isa, DataType::Uint32, RedOp::Max, 0x80000000u, 1, 0x80000000u);
  checkWrap<uint8_t>(isa, DataType::Uint8, RedOp::Max, 200, 100, 200);
  checkWrap<int8_t>(isa, DataType::Int8, RedOp::Max, -100, 100, 100);
}

/// Three 16-bit sources; every element of the result must be `want`.
void checkHalfSum(Isa isa, DataType type, RedOp op, std::vector<uint16_t> values, uint16_t want) {
  std::vector<std::vector<uint16_t>> srcs;
  for (uint16_t v : values) srcs.emplace_back(70, v);
  const auto out = reduce(isa, type, op, srcs);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], want) << std::hex << i << " " << out[i];
}

TEST_P(ReduceKernelSemantics, HalvesAccumulateInFloat32AndRoundOnce) {
  const Isa isa = GetParam();
  // 1 + 2^-11 + 2^-11: rounding after each step would give 1 (two ties to even); once: 1 + 2^-10.
  checkHalfSum(isa, DataType::Float16, RedOp::Sum, {0x3C00, 0x1000, 0x1000}, 0x3C01);
  checkHalfSum(isa, DataType::Bfloat16, RedOp::Sum, {0x3F80, 0x3B80, 0x3B80}, 0x3F81);
  checkHalfSum(isa, DataType::Float16, RedOp::Sum, {0x7BFF, 0x7BFF}, 0x7C00);          // overflow to inf
  checkHalfSum(isa, DataType::Float16, RedOp::Sum, {0x7BFF, 0x4800}, 0x7BFF);          // 65512 -> 65504
  checkHalfSum(isa, DataType::Float16, RedOp::Sum, {0x7BFF, 0x4C00}, 0x7C00);          // 65520: tie -> inf
  checkHalfSum(isa, DataType::Float16, RedOp::Sum, {0x7BFF, 0x7BFF, 0xFBFF}, 0x7BFF);  // no overflow in float32
  checkHalfSum(isa, DataType::Float16, RedOp::Sum, {0x0001, 0x0001}, 0x0002);          // subnormals exact
  checkHalfSum(isa, DataType::Float16, RedOp::Prod, {0x0001, 0x3800}, 0x0000);         // 2^-25: tie -> 0
  checkHalfSum(isa, DataType::Float16, RedOp::Prod, {0x0003, 0x3800}, 0x0002);         // 1.5 ulp: tie -> 2
  checkHalfSum(isa, DataType::Bfloat16, RedOp::Sum, {0x7F7F, 0x7F7F}, 0x7F80);
  checkHalfSum(isa, DataType::Bfloat16, RedOp::Prod, {0x0001, 0x3F00}, 0x0000);        // bf16 subnormal tie
}

TEST_P(ReduceKernelSemantics, EveryHalfPatternSurvivesTheVectorConversions) {
  for (DataType type : {DataType::Float16, DataType::Bfloat16}) {
    const uint16_t quiet = type == DataType::Float16 ? 0x200 : 0x40;
    auto isNan = type == DataType::Float16 ? kref::halfIsNan : kref::bf16IsNan;
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
    const auto sum = reduce<uint16_t>(GetParam(), type, RedOp::Sum, {all, std::vector<uint16_t>(65536, 0x8000)});  // x + -0
    const auto max = reduce<uint16_t>(GetParam(), type, RedOp::Max, {all, all});
    const auto prod = reduce<uint16_t>(GetParam(), type, RedOp::Prod, {all, std::vector<uint16_t>(65536, type == DataType::Float16 ? 0x3C00 : 0x3F80)});
    for (uint32_t i = 0; i < 65536; ++i) {
      const uint16_t want = isNan(all[i]) ? static_cast<uint16_t>(all[i] | quiet) : all[i];
      ASSERT_EQ(sum[i], want) << std::hex << i;
      ASSERT_EQ(max[i], want) << std::hex << i;
      ASSERT_EQ(prod[i], want) << std::hex << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllPaths, ReduceKernelSemantics, ::testing::Values(Isa::Scalar, Isa::Avx2, Isa::Avx512),
                         [](const ::testing::TestParamInfo<Isa>& p) { return std::string(conflux::cpu::isaName(p.param)); });

// ---- divideInPlace (one implementation for every path) ----
template <class T>
std::vector<T> divided(DataType type, std::vector<T> v, int divisor) {
  conflux::cpu::divideInPlace(type, v.data(), v.size(), divisor);
  return v;
}

TEST(ReduceKernelDivide, IntegersTruncateTowardZero) {
  EXPECT_EQ(divided<int8_t>(DataType::Int8, {-7, 7, -128, 127}, 2), (std::vector<int8_t>{-3, 3, -64, 63}));
  EXPECT_EQ(divided<uint8_t>(DataType::Uint8, {255, 3}, 4), (std::vector<uint8_t>{63, 0}));
  EXPECT_EQ(divided<int32_t>(DataType::Int32, {-9, 9, INT32_MIN}, 4), (std::vector<int32_t>{-2, 2, INT32_MIN / 4}));
  EXPECT_EQ(divided<uint32_t>(DataType::Uint32, {UINT32_MAX}, 3), (std::vector<uint32_t>{UINT32_MAX / 3}));
  EXPECT_EQ(divided<int64_t>(DataType::Int64, {INT64_MIN, -5}, 3), (std::vector<int64_t>{INT64_MIN / 3, -1}));
  EXPECT_EQ(divided<uint64_t>(DataType::Uint64, {UINT64_MAX}, 2), (std::vector<uint64_t>{UINT64_MAX / 2}));
  EXPECT_EQ(divided<int32_t>(DataType::Int32, {-9}, 1), (std::vector<int32_t>{-9}));
  EXPECT_EQ(divided<int32_t>(DataType::Int32, {-9}, 0), (std::vector<int32_t>{-9}));  // outside the contract: no-op
}

TEST(ReduceKernelDivide, FloatsDivideAndHalvesRoundOnce) {
  EXPECT_EQ(divided<float>(DataType::Float32, {1.0f, -7.0f}, 3), (std::vector<float>{1.0f / 3.0f, -7.0f / 3.0f}));
  EXPECT_EQ(divided<double>(DataType::Float64, {1.0, 1e300}, 3), (std::vector<double>{1.0 / 3.0, 1e300 / 3.0}));
  // 1/3 in float32 is 0x3EAAAAAB; float16 0x3555, bfloat16 0x3EAB (nearest even).
  EXPECT_EQ(divided<uint16_t>(DataType::Float16, {0x3C00, 0x7C00, 0x0001}, 3), (std::vector<uint16_t>{0x3555, 0x7C00, 0x0000}));
  EXPECT_EQ(divided<uint16_t>(DataType::Float16, {0x0003}, 2), (std::vector<uint16_t>{0x0002}));  // 1.5 ulp: tie -> 2
  EXPECT_EQ(divided<uint16_t>(DataType::Bfloat16, {0x3F80, 0xFF80}, 3), (std::vector<uint16_t>{0x3EAB, 0xFF80}));
  const auto nan = divided<uint16_t>(DataType::Float16, {0x7E00}, 8);
  EXPECT_TRUE(kref::halfIsNan(nan[0]));
  std::vector<float> many(1001, 6.0f);
  EXPECT_EQ(divided<float>(DataType::Float32, many, 4), std::vector<float>(1001, 1.5f));
  EXPECT_TRUE(divided<float>(DataType::Float32, {}, 4).empty());
}

// ---- copy and dispatch ----
class IsaGuard {
 public:
  ~IsaGuard() { conflux::cpu::forceIsa("auto"); }
};

TEST(ReduceKernelDispatch, CopyOnEveryPath) {
  IsaGuard restore;
  const size_t mib = size_t{1} << 20;
  std::vector<unsigned char> src(3 * mib + 256), dst(3 * mib + 256);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (!conflux::cpu::forceIsa(isa)) continue;
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, mib - 1, mib, mib + 13, 3 * mib + 5}) {
      for (size_t dOff : {size_t{0}, size_t{3}, size_t{64}}) {
        std::fill(dst.begin(), dst.end(), 0xEE);
        conflux::cpu::copy(dst.data() + dOff, src.data() + 1, bytes);
        ASSERT_EQ(std::memcmp(dst.data() + dOff, src.data() + 1, bytes), 0) << conflux::cpu::isaName() << " " << bytes;
        for (size_t i = 0; i < dOff; ++i) ASSERT_EQ(dst[i], 0xEE);
        for (size_t i = dOff + bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE);
      }
    }
  }
}

TEST(ReduceKernelDispatch, ForceIsaAndNames) {
  IsaGuard restore;
  const std::string active = conflux::cpu::isaName();
  EXPECT_TRUE(active == "scalar" || active == "avx2" || active == "avx512") << active;
  EXPECT_TRUE(conflux::cpu::isaSupported(Isa::Scalar));
  EXPECT_FALSE(conflux::cpu::forceIsa("sse9"));
  EXPECT_EQ(conflux::cpu::isaName(), active);
  ASSERT_TRUE(conflux::cpu::forceIsa("scalar"));
  EXPECT_STREQ(conflux::cpu::isaName(), "scalar");
  EXPECT_EQ(conflux::cpu::reduceFunction(DataType::Float32, RedOp::Sum),
            conflux::cpu::reduceFunction(Isa::Scalar, DataType::Float32, RedOp::Sum));
  ASSERT_TRUE(conflux::cpu::forceIsa("auto"));
  // "auto": the widest path, but AVX2 over AVX-512 on AMD CPUs.
  bool amd = false;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  amd = __get_cpuid(0, &eax, &ebx, &ecx, &edx) != 0 && ebx == 0x68747541u;  // "Auth"
#endif
  const char* preferred = conflux::cpu::isaSupported(Isa::Avx512) && !amd ? "avx512"
                          : conflux::cpu::isaSupported(Isa::Avx2)         ? "avx2"
                          : conflux::cpu::isaSupported(Isa::Avx512)       ? "avx512"
                                                                          : "scalar";
  EXPECT_STREQ(conflux::cpu::isaName(), preferred);
}

TEST(ReduceKernelDispatch, EveryKernelExistsAndAvgIsSum) {
  for (int i = 0; i < conflux::cpu::kNumIsas; ++i) {
    const auto isa = static_cast<Isa>(i);
    if (!conflux::cpu::isaSupported(isa)) {
      EXPECT_EQ(conflux::cpu::reduceFunction(isa, DataType::Float32, RedOp::Sum), nullptr);
      continue;
    }
    for (int t = 0; t < conflux::kNumDataTypes; ++t) {
      const auto type = static_cast<DataType>(t);
      for (int o = 0; o < conflux::kNumRedOps; ++o) {
        const auto op = static_cast<RedOp>(o);
        if (conflux::opAppliesTo(op, type)) EXPECT_NE(conflux::cpu::reduceFunction(isa, type, op), nullptr);
        else EXPECT_EQ(conflux::cpu::reduceFunction(isa, type, op), nullptr);
      }
      EXPECT_EQ(conflux::cpu::reduceFunction(isa, type, RedOp::Avg), conflux::cpu::reduceFunction(isa, type, RedOp::Sum));
      EXPECT_EQ(conflux::cpu::reduceFunction(isa, type, RedOp::PreMulSum),
                conflux::cpu::reduceFunction(isa, type, RedOp::Sum));
      EXPECT_NE(conflux::cpu::premulSumFunction(isa, type), nullptr);
    }
  }
  EXPECT_NE(conflux::cpu::reduceFunction(DataType::Bfloat16, RedOp::Max), nullptr);
}

// copyStreaming: non-temporal at every size from 256 bytes, any alignment, on every ISA path.
TEST_P(ReduceKernelSemantics, CopyStreamingMatchesMemcpy) {
  conflux::cpu::forceIsa(GetParam());
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{255}, size_t{256}, size_t{257}, size_t{4099}, (size_t{1} << 20) + 3}) {
    for (size_t shift : {size_t{0}, size_t{1}, size_t{13}}) {
      std::vector<unsigned char> src(bytes + 16), dst(bytes + 32, 0xEE);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
      conflux::cpu::copyStreaming(dst.data() + shift, src.data() + (shift % 7), bytes);
      EXPECT_EQ(std::memcmp(dst.data() + shift, src.data() + (shift % 7), bytes), 0) << bytes << " bytes, shift " << shift;
      for (size_t i = 0; i < shift; ++i) EXPECT_EQ(dst[i], 0xEE);
      for (size_t i = shift + bytes; i < dst.size(); ++i) EXPECT_EQ(dst[i], 0xEE) << "wrote past the end";
    }
  }
  conflux::cpu::forceIsa("auto");
}

}  // namespace
