// copyBytes (core/copy_bytes.h): the same bytes as memcpy at every page offset of source and destination,
// both on the vector path (destination 1-63 bytes past the source, modulo a page) and on memcpy's, and
// nothing written outside the destination.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/copy_bytes.h"

namespace {

using conflux::copyBytes;
using conflux::memcpyAliasesSlowly;

struct PageBuffer {
  explicit PageBuffer(size_t bytes)
      : p(static_cast<unsigned char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)), &std::free) {}
  std::unique_ptr<unsigned char, decltype(&std::free)> p;
};

TEST(CopyBytes, TakesTheVectorLoopExactlyWhereMemcpyAliasesSlowly) {
  alignas(4096) static unsigned char page[2 * 4096];
  const unsigned char* src = page;
  EXPECT_FALSE(memcpyAliasesSlowly(page + 16, src, 2047));  // below rep movsb
  EXPECT_TRUE(memcpyAliasesSlowly(page + 16, src, 2048));
  EXPECT_TRUE(memcpyAliasesSlowly(page + 1, src, (1 << 20) - 1));
  EXPECT_FALSE(memcpyAliasesSlowly(page + 1, src, 1 << 20));        // glibc no longer uses rep movsb
  EXPECT_TRUE(memcpyAliasesSlowly(page + 4096 + 31, src, 4096));  // the offset counts modulo a page
  EXPECT_FALSE(memcpyAliasesSlowly(page + 32, src, 4096));          // measured fast: an eager slot's payload
  EXPECT_FALSE(memcpyAliasesSlowly(page + 4096, src, 4096));        // same offset: fast
  EXPECT_FALSE(memcpyAliasesSlowly(page, page + 16, 4096));         // destination behind: fast
}

TEST(CopyBytes, CopiesLikeMemcpyAtEveryOffset) {
  constexpr size_t kMax = 70000;
  PageBuffer src(kMax + 2 * 4096), dst(kMax + 3 * 4096);
  for (size_t i = 0; i < kMax + 2 * 4096; ++i) src.p.get()[i] = static_cast<unsigned char>(i * 131 + 7);
  const std::vector<size_t> sizes = {0, 1, 15, 63, 64, 65, 2047, 2048, 2049, 4096 + 17, 65536, kMax};
  const std::vector<size_t> srcOffsets = {0, 1, 16, 48, 4095};
  int vectorPaths = 0;
  for (size_t bytes : sizes) {
    for (size_t so : srcOffsets) {
      for (size_t ahead : {size_t{0}, size_t{1}, size_t{16}, size_t{31}, size_t{32}, size_t{63}, size_t{64}, size_t{4080}}) {
        const size_t doff = (so + ahead) % 4096 + 4096;  // a guard page's worth in front
        unsigned char* d = dst.p.get() + doff;
        const unsigned char* s = src.p.get() + so;
        std::fill(dst.p.get(), dst.p.get() + kMax + 3 * 4096, static_cast<unsigned char>(0xA5));
        vectorPaths += memcpyAliasesSlowly(d, s, bytes) ? 1 : 0;
        copyBytes(d, s, bytes);
        for (size_t i = 0; i < bytes; ++i) {
          ASSERT_EQ(d[i], s[i]) << "bytes " << bytes << " src offset " << so << " ahead " << ahead << " at " << i;
        }
        for (size_t i = 0; i < doff; ++i) ASSERT_EQ(dst.p.get()[i], 0xA5) << "written before the destination";
        for (size_t i = doff + bytes; i < kMax + 3 * 4096; ++i) {
          ASSERT_EQ(dst.p.get()[i], 0xA5) << "written past the destination: bytes " << bytes << " ahead " << ahead;
        }
      }
    }
  }
  EXPECT_GT(vectorPaths, 0);  // the vector loop was exercised, not only memcpy
}

TEST(CopyBytes, OverlappingRangesAreCopiedAsByMemmove) {
  std::vector<unsigned char> buf(3 * 4096), want(3 * 4096);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = want[i] = static_cast<unsigned char>(i * 7 + 1);
  std::memmove(want.data() + 16, want.data(), 8192);
  copyBytes(buf.data() + 16, buf.data(), 8192);  // destination 16 bytes ahead: the loop would smear
  EXPECT_EQ(buf, want);
}

}  // namespace
