// CUDA reduce kernels against the CPU kernels (cpu::reduceFunction, cpu::divideInPlace), bit for bit:
// every datatype x op (Avg = Sum then launchDivide), 1..8 sources, odd counts, 16-byte aligned and
// misaligned pointers (one shared offset: vector path with a head; differing offsets: scalar path),
// in place, fused second destination, explicit grids, NaN / signed-zero semantics, argument checks.
// Guard bytes around every destination must survive. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/types.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/reduce.h"

using conflux::DataType;
using conflux::RedOp;
namespace cuda = conflux::cuda;

namespace {

bool haveDevice() {
  static const bool have = [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  }();
  return have;
}

#define SKIP_WITHOUT_DEVICE()                  \
  do {                                         \
    if (!haveDevice()) {                       \
      GTEST_SKIP() << "skipped: no CUDA device"; \
    }                                          \
  } while (0)

constexpr size_t kGuard = 64;      // bytes before and after every data region
constexpr size_t kMaxOffset = 4;   // elements of offset room
constexpr unsigned char kGuardByte = 0xA5;
constexpr size_t kLargeCount = (size_t{1} << 20) + 3;

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Random element bits: integers uniform; floats mostly ordinary (exponents around 1, random mantissa,
/// either sign) with ~2% zeros of both signs, infinities, NaNs and subnormals.
void fillRandom(DataType t, unsigned char* p, size_t n, uint64_t& s) {
  const size_t es = conflux::dataTypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = splitmix(s);
    uint64_t bits = r;
    const bool special = (r >> 56) % 50 == 0;
    const uint64_t sign = (r >> 63) & 1;
    switch (t) {
      case DataType::Float32: {
        static const uint32_t sp[] = {0, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x00000001u};
        bits = special ? sp[(r >> 8) % 6] : (sign << 31) | ((117 + (r >> 40) % 21) << 23) | (r & 0x7FFFFF);
        break;
      }
      case DataType::Float64: {
        static const uint64_t sp[] = {0, 1ull << 63, 0x7FF0000000000000ull, 0xFFF0000000000000ull,
                                      0x7FF8000000000000ull, 1};
        bits = special ? sp[(r >> 8) % 6] : (sign << 63) | ((1013 + (r >> 40) % 21) << 52) | (r & ((1ull << 52) - 1));
        break;
      }
      case DataType::Float16: case DataType::Bfloat16: {
        const uint16_t expMask = t == DataType::Float16 ? 0x7C00 : 0x7F80;
        bits = r & 0xFFFF;
        if ((bits & expMask) == expMask && !special) bits &= ~uint64_t{0x4000};  // mostly finite
        break;
      }
      default:
        break;
    }
    std::memcpy(p + i * es, &bits, es);
  }
}

bool isNan(DataType t, const unsigned char* p) {
  switch (t) {
    case DataType::Float32: { float v; std::memcpy(&v, p, 4); return std::isnan(v); }
    case DataType::Float64: { double v; std::memcpy(&v, p, 8); return std::isnan(v); }
    case DataType::Float16: { uint16_t b; std::memcpy(&b, p, 2); return (b & 0x7C00) == 0x7C00 && (b & 0x3FF); }
    case DataType::Bfloat16: { uint16_t b; std::memcpy(&b, p, 2); return (b & 0x7F80) == 0x7F80 && (b & 0x7F); }
    default: return false;
  }
}

/// A device buffer with guard room; data starts at kGuard + offset * elementSize.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&p_, bytes) != cudaSuccess) p_ = nullptr;
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

/// Where the buffers of one case sit: element offsets from a 256-byte aligned base + kGuard.
struct Layout {
  const char* name;
  size_t srcOff[cuda::kMaxReduceSources];
  size_t dstOff;
  int inPlace;     // -1, or the source dst equals (then dstOff must equal that source's offset)
  bool useDst2;
  size_t dst2Off;
};

/// Sources (host and device copies, filled once), destinations, and the case runner.
class Fixture {
 public:
  Fixture(DataType type, size_t maxCount, uint64_t seed)
      : type_(type), es_(conflux::dataTypeSize(type)), cap_(2 * kGuard + (maxCount + kMaxOffset) * es_),
        dst_(cap_), dst2_(cap_) {
    for (int k = 0; k < cuda::kMaxReduceSources; ++k) {
      host_.emplace_back(cap_);
      fillRandom(type, host_[k].data(), cap_ / es_, seed);
      dev_.push_back(std::make_unique<DeviceBuffer>(cap_));
      cudaMemcpy(dev_[k]->get(), host_[k].data(), cap_, cudaMemcpyHostToDevice);
    }
  }

  /// Runs one case; returns false after recording a failure. blocks == 0: launchReduce's own grid.
  bool run(RedOp op, int nsrc, size_t count, const Layout& l, int blocks = 0, int threads = 0) {
    const std::string what = std::string(conflux::dataTypeName(type_)) + "/" + std::string(conflux::redOpName(op)) +
                             " nsrc=" + std::to_string(nsrc) + " count=" + std::to_string(count) + " layout=" +
                             l.name + " grid=" + std::to_string(blocks) + "x" + std::to_string(threads);
    const size_t bytes = count * es_;
    const size_t dstAt = kGuard + l.dstOff * es_, dst2At = kGuard + l.dst2Off * es_;
    EXPECT_EQ(cudaMemset(dst_.get(), kGuardByte, cap_), cudaSuccess) << what;
    EXPECT_EQ(cudaMemset(dst2_.get(), kGuardByte, cap_), cudaSuccess) << what;
    std::vector<const void*> dsrc(nsrc), hsrc(nsrc);
    for (int k = 0; k < nsrc; ++k) {
      const size_t at = kGuard + l.srcOff[k] * es_;
      hsrc[k] = host_[k].data() + at;
      dsrc[k] = dev_[k]->get() + at;
    }
    if (l.inPlace >= 0 && l.inPlace < nsrc) {
      cudaMemcpy(dst_.get() + dstAt, hsrc[l.inPlace], bytes, cudaMemcpyHostToDevice);
      dsrc[l.inPlace] = dst_.get() + dstAt;
    }
    void* d2 = l.useDst2 ? dst2_.get() + dst2At : nullptr;
    const cudaError_t err =
        blocks == 0 ? cuda::launchReduce(type_, op, dst_.get() + dstAt, d2, dsrc.data(), nsrc, count, nullptr)
                    : cuda::launchReduceWithGrid(type_, op, dst_.get() + dstAt, d2, dsrc.data(), nsrc, count, blocks,
                                                 threads, nullptr);
    EXPECT_EQ(err, cudaSuccess) << what << ": " << cudaGetErrorString(err);
    if (op == RedOp::Avg) {
      EXPECT_EQ(cuda::launchDivide(type_, dst_.get() + dstAt, count, nsrc, nullptr), cudaSuccess) << what;
      if (d2 != nullptr) {
        EXPECT_EQ(cuda::launchDivide(type_, d2, count, nsrc, nullptr), cudaSuccess) << what;
      }
    }
    const cudaError_t sync = cudaDeviceSynchronize();
    EXPECT_EQ(sync, cudaSuccess) << what << ": " << cudaGetErrorString(sync);
    if (err != cudaSuccess || sync != cudaSuccess) return false;

    std::vector<unsigned char> expected(cap_, kGuardByte);
    conflux::cpu::reduceFunction(type_, op)(expected.data() + dstAt, hsrc.data(), nsrc, count);
    if (op == RedOp::Avg) conflux::cpu::divideInPlace(type_, expected.data() + dstAt, count, nsrc);
    if (!check(dst_, dstAt, expected, dstAt, bytes, nsrc == 1, what + " dst")) return false;
    if (!l.useDst2) {
      std::vector<unsigned char> untouched(cap_, kGuardByte);
      return check(dst2_, 0, untouched, 0, 0, true, what + " dst2 (unused)");
    }
    std::vector<unsigned char> expected2(cap_, kGuardByte);
    if (bytes) std::memcpy(expected2.data() + dst2At, expected.data() + dstAt, bytes);
    return check(dst2_, dst2At, expected2, dst2At, bytes, nsrc == 1, what + " dst2");
  }

 private:
  /// Compares the whole device buffer with `expected`: guard bytes exactly, data element by element
  /// (bit-identical, or both NaN unless `exact`).
  bool check(const DeviceBuffer& buf, size_t at, const std::vector<unsigned char>& expected, size_t expAt,
             size_t bytes, bool exact, const std::string& what) {
    std::vector<unsigned char> got(cap_);
    EXPECT_EQ(cudaMemcpy(got.data(), buf.get(), cap_, cudaMemcpyDeviceToHost), cudaSuccess) << what;
    for (size_t b = 0; b < cap_; ++b) {
      if (b >= at && b < at + bytes) continue;
      if (got[b] != kGuardByte) {
        ADD_FAILURE() << what << ": guard byte " << b << " overwritten (data at " << at << ", " << bytes << " bytes)";
        return false;
      }
    }
    for (size_t i = 0; i < bytes / es_; ++i) {
      const unsigned char* g = got.data() + at + i * es_;
      const unsigned char* e = expected.data() + expAt + i * es_;
      if (std::memcmp(g, e, es_) == 0) continue;
      if (!exact && isNan(type_, g) && isNan(type_, e)) continue;
      uint64_t gv = 0, ev = 0;
      std::memcpy(&gv, g, es_);
      std::memcpy(&ev, e, es_);
      ADD_FAILURE() << what << ": element " << i << " got 0x" << std::hex << gv << " want 0x" << ev;
      return false;
    }
    return true;
  }

  DataType type_;
  size_t es_, cap_;
  std::vector<std::vector<unsigned char>> host_;
  std::vector<std::unique_ptr<DeviceBuffer>> dev_;
  DeviceBuffer dst_, dst2_;
};

// Offsets in elements. Equal offsets keep every pointer congruent mod 16 (vector path; offset 1 adds a
// head); differing offsets force the scalar path.
const Layout kLayouts[] = {
    {"aligned", {0, 0, 0, 0, 0, 0, 0, 0}, 0, -1, false, 0},
    {"same_offset_1", {1, 1, 1, 1, 1, 1, 1, 1}, 1, -1, false, 0},
    {"mixed_offsets", {0, 1, 2, 3, 0, 1, 2, 3}, 1, -1, false, 0},
    {"in_place_first", {0, 0, 0, 0, 0, 0, 0, 0}, 0, 0, false, 0},
    {"in_place_last_offset_1", {1, 1, 1, 1, 1, 1, 1, 1}, 1, 7, false, 0},
    {"fused_dst2", {0, 0, 0, 0, 0, 0, 0, 0}, 0, -1, true, 0},
    {"fused_dst2_offset_1", {1, 1, 1, 1, 1, 1, 1, 1}, 1, -1, true, 1},
    {"fused_dst2_misaligned", {0, 0, 0, 0, 0, 0, 0, 0}, 0, -1, true, 3},
    {"fused_in_place", {2, 2, 2, 2, 2, 2, 2, 2}, 2, 0, true, 2},
};

/// The layout with inPlace clamped to the last source of an nsrc-source case.
Layout forSources(const Layout& l, int nsrc) {
  Layout r = l;
  if (r.inPlace >= nsrc) r.inPlace = nsrc - 1;
  if (r.inPlace >= 0) r.dstOff = r.srcOff[r.inPlace];
  return r;
}

using Param = std::tuple<DataType, RedOp>;
class CudaReduceTest : public ::testing::TestWithParam<Param> {};

TEST_P(CudaReduceTest, MatchesCpuKernels) {
  SKIP_WITHOUT_DEVICE();
  const auto [type, op] = GetParam();
  Fixture fx(type, kLargeCount, static_cast<uint64_t>(type) * 31 + static_cast<uint64_t>(op) + 1);
  for (int nsrc = 1; nsrc <= cuda::kMaxReduceSources; ++nsrc)
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}, kLargeCount})
      for (const Layout& l : kLayouts)
        if (!fx.run(op, nsrc, count, forSources(l, nsrc))) return;
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(conflux::dataTypeName(std::get<0>(info.param))) + "_" +
         std::string(conflux::redOpName(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(
    AllTypesOps, CudaReduceTest,
    ::testing::Combine(::testing::Values(DataType::Int8, DataType::Uint8, DataType::Int32, DataType::Uint32,
                                         DataType::Int64, DataType::Uint64, DataType::Float16, DataType::Float32,
                                         DataType::Float64, DataType::Bfloat16),
                       ::testing::Values(RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg)),
    paramName);

// The grid-stride schedule with worker counts that are not multiples of a warp, a block or the unroll.
TEST(CudaReduceGrid, AnyWorkerCount) {
  SKIP_WITHOUT_DEVICE();
  const int grids[][2] = {{1, 1}, {1, 32}, {3, 37}, {1, 256}, {7, 100}, {1000, 256}};
  for (DataType type : {DataType::Int8, DataType::Float16, DataType::Float32, DataType::Float64}) {
    Fixture fx(type, 100003, 7);
    for (const auto& g : grids)
      for (size_t count : {size_t{1}, size_t{33}, size_t{4099}, size_t{100003}})
        for (int li : {0, 1, 2, 5})
          if (!fx.run(RedOp::Max, 3, count, kLayouts[li], g[0], g[1])) return;
  }
}

// IEEE 754-2019 maximum/minimum and signed zeros, element by element, against the CPU kernels and
// against the expected values (+0 / -0 / NaN), on the vector path and the scalar path.
TEST(CudaReduceSemantics, NanAndSignedZero) {
  SKIP_WITHOUT_DEVICE();
  const float nan = std::nanf("");
  const float a[] = {nan, 1.0f, -0.0f, 0.0f, -0.0f, 0.0f, INFINITY, 2.0f};
  const float b[] = {1.0f, nan, 0.0f, -0.0f, -0.0f, 0.0f, -INFINITY, -3.0f};
  // Expected sign (1 = negative) of max / min / sum for the zero pairs (indices 2..5).
  const int maxNeg[] = {0, 0, 1, 0}, minNeg[] = {1, 1, 1, 0}, sumNeg[] = {0, 0, 1, 0};
  const size_t n = 64;  // the pattern repeated: vectors and scalar elements both see every pair
  for (size_t off : {size_t{0}, size_t{1}}) {
    DeviceBuffer da((n + 2) * 4), db((n + 2) * 4), dd((n + 2) * 4);
    std::vector<float> ha(n + 2), hb(n + 2);
    for (size_t i = 0; i < n + 2; ++i) ha[i] = a[i % 8], hb[i] = b[i % 8];
    cudaMemcpy(da.get(), ha.data(), (n + 2) * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db.get(), hb.data(), (n + 2) * 4, cudaMemcpyHostToDevice);
    for (RedOp op : {RedOp::Max, RedOp::Min, RedOp::Sum}) {
      // Same offset for all three: vector path; the destination one further: scalar path.
      for (size_t dOff : {off, off + 1}) {
        const void* srcs[] = {da.get() + off * 4, db.get() + off * 4};
        ASSERT_EQ(cuda::launchReduce(DataType::Float32, op, dd.get() + dOff * 4, nullptr, srcs, 2, n, nullptr),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<float> got(n);
        cudaMemcpy(got.data(), dd.get() + dOff * 4, n * 4, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < n; ++i) {
          const size_t j = (i + off) % 8;
          const int* neg = op == RedOp::Max ? maxNeg : op == RedOp::Min ? minNeg : sumNeg;
          if (j < 2 || (j == 6 && op == RedOp::Sum)) {
            EXPECT_TRUE(std::isnan(got[i])) << "op " << static_cast<int>(op) << " element " << i;
          } else if (j >= 2 && j <= 5) {
            EXPECT_EQ(got[i], 0.0f) << "element " << i;
            EXPECT_EQ(std::signbit(got[i]), neg[j - 2] == 1) << "op " << static_cast<int>(op) << " element " << i;
          }
        }
      }
    }
  }
  // Every float type through the CPU comparison, with many specials.
  for (DataType type : {DataType::Float16, DataType::Bfloat16, DataType::Float32, DataType::Float64}) {
    Fixture fx(type, 1000, 99);
    for (RedOp op : {RedOp::Max, RedOp::Min, RedOp::Sum, RedOp::Prod})
      for (int li : {0, 2})
        if (!fx.run(op, 2, 1000, kLayouts[li])) return;
  }
}

TEST(CudaReduceArgs, Validation) {
  SKIP_WITHOUT_DEVICE();
  DeviceBuffer buf(1024);
  void* p = buf.get();
  const void* srcs[9] = {p, p, p, p, p, p, p, p, p};
  EXPECT_EQ(cuda::launchReduce(DataType::Float32, RedOp::Sum, p, nullptr, srcs, 0, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::launchReduce(DataType::Float32, RedOp::Sum, p, nullptr, srcs, 9, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::launchReduce(static_cast<DataType>(42), RedOp::Sum, p, nullptr, srcs, 2, 16, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::launchReduce(DataType::Float32, static_cast<RedOp>(9), p, nullptr, srcs, 2, 16, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::launchReduce(DataType::Float32, RedOp::Sum, nullptr, nullptr, nullptr, 2, 0, nullptr), cudaSuccess);
  const void* odd[] = {buf.get() + 1, p};
  EXPECT_EQ(cuda::launchReduce(DataType::Float32, RedOp::Sum, p, nullptr, odd, 2, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::launchReduce(DataType::Float32, RedOp::Sum, p, buf.get() + 2, srcs, 2, 16, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::launchReduceWithGrid(DataType::Float32, RedOp::Sum, p, nullptr, srcs, 2, 16, 1, 257, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::launchDivide(static_cast<DataType>(-1), p, 16, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::launchDivide(DataType::Int32, buf.get() + 1, 16, 2, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::launchDivide(DataType::Int32, nullptr, 16, 1, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
