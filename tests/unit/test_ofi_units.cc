// Pure logic of the libfabric transport (tag layout, striping, chunk sizing) and its registration cache
// (hits, misses, LRU eviction, pinning) on a real tcp;ofi_rxm domain.
#include <cstdlib>

#include "test_ofi_util.h"
#include "transport/ofi/rails.h"
#include "transport/ofi/tags.h"

namespace {

using namespace ofitest;
using namespace conflux::ofi;

TEST(OfiTags, FieldsRoundTrip) {
  const uint64_t user = spaceTag(0x9, makeUserTag(0xabc, 0x234));
  EXPECT_EQ(user, 0x9abc234u);
  const uint64_t w = wireTag(123456, user, 4095);
  EXPECT_EQ(wireTagSource(w), 123456);
  EXPECT_EQ(wireTagUser(w), user);
  EXPECT_EQ(wireTagChunk(w), 4095u);
  EXPECT_EQ(w >> 60, 0u) << "top 4 bits stay free for providers";
  EXPECT_NE(wireTag(1, user, 0), wireTag(2, user, 0));
  EXPECT_NE(wireTag(1, user, 0), wireTag(1, user, 1));
  EXPECT_EQ(makeUserTag(0x1abc, 0x1234), makeUserTag(0xabc, 0x234)) << "fields are truncated, not spilled";
  EXPECT_EQ(spaceTag(0x13, makeUserTag(0xfff, 0xfff)), 0x3ffffffu) << "the space is truncated, not spilled";
  EXPECT_EQ(spaceTag(1, kMaxSpaceTag + 1), spaceTag(1, 0)) << "a tag never reaches into the space bits";
  EXPECT_NE(spaceTag(1, 5), spaceTag(2, 5));
  EXPECT_LE(spaceTag(kMaxTagSpaces - 1, kMaxSpaceTag), kMaxUserTag);
}

TEST(OfiRails, ChunkSizing) {
  EXPECT_EQ(chunkCount(0, 4096), 1u);
  EXPECT_EQ(chunkCount(1, 4096), 1u);
  EXPECT_EQ(chunkCount(4096, 4096), 1u);
  EXPECT_EQ(chunkCount(4097, 4096), 2u);
  EXPECT_EQ(chunkSizeFor(1 << 20, 4096, 0), 4096u);
  const size_t huge = size_t(1) << 32;
  const size_t c = chunkSizeFor(huge, 4096, 0);
  EXPECT_LE(chunkCount(huge, c), kMaxChunks);
  EXPECT_EQ(chunkSizeFor(huge, 4096, 1 << 20), size_t(1) << 20) << "never above max_msg_size";
}

TEST(OfiRails, StripingCoversEveryChunkOnce) {
  for (int rails = 1; rails <= 4; ++rails) {
    for (uint64_t tag = 0; tag < 5; ++tag) {
      for (uint32_t n : {1u, 2u, 3u, 7u, 64u}) {
        std::vector<int> seen(n, 0);
        const uint32_t off = railOffset(tag, rails);
        for (int r = 0; r < rails; ++r) {
          for (uint32_t c = firstChunkOnRail(r, rails, off, n); c < n; c += uint32_t(rails)) {
            EXPECT_EQ(int((c + off) % uint32_t(rails)), r);
            ++seen[c];
          }
        }
        for (uint32_t c = 0; c < n; ++c) EXPECT_EQ(seen[c], 1) << "rails " << rails << " chunk " << c;
      }
    }
  }
}

struct PageBuffer {
  explicit PageBuffer(size_t bytes) : p(static_cast<uint8_t*>(std::aligned_alloc(4096, bytes))) {}
  ~PageBuffer() { std::free(p); }
  uint8_t* p;
};

TEST(OfiMrCache, HitsMissesAndLruEviction) {
  runThreads(1, [](Options& o) { o.mrCacheEntries = 2; }, [&](int, Transport& t, ThreadGroup&) {
    PageBuffer a(65536), b(65536), c(65536);
    conflux::Status err;
    MemoryRegion* ra = t.registerMemory(a.p, 65536, 0, &err);
    ASSERT_NE(ra, nullptr) << err.message();
    EXPECT_EQ(t.mrCacheStats().misses, 1u);
    MemoryRegion* ra2 = t.registerMemory(a.p + 100, 1000);  // inside a: hit, same registration
    EXPECT_EQ(ra2, ra);
    EXPECT_EQ(t.mrCacheStats().hits, 1u);
    MemoryRegion* rb = t.registerMemory(b.p, 65536);
    ASSERT_NE(rb, nullptr);
    EXPECT_NE(rb, ra);
    // Everything pinned: a third entry exceeds the bound instead of evicting something in use.
    MemoryRegion* rc = t.registerMemory(c.p, 65536);
    ASSERT_NE(rc, nullptr);
    EXPECT_EQ(t.mrCacheStats().entries, 3u);
    EXPECT_EQ(t.mrCacheStats().evictions, 0u);
    // Unpinning a: it is the least recently used unpinned entry and goes.
    t.release(ra);
    t.release(ra2);
    EXPECT_EQ(t.mrCacheStats().evictions, 1u);
    EXPECT_EQ(t.mrCacheStats().entries, 2u);
    // b is still cached: a hit.
    t.release(rb);
    const auto hitsBefore = t.mrCacheStats().hits;
    MemoryRegion* rb2 = t.registerMemory(b.p + 4096, 4096);
    EXPECT_EQ(rb2, rb);
    EXPECT_EQ(t.mrCacheStats().hits, hitsBefore + 1);
    // a again: a miss, which evicts the LRU unpinned entry (none: b, c pinned) -> 3 entries for now.
    MemoryRegion* ra3 = t.registerMemory(a.p, 65536);
    ASSERT_NE(ra3, nullptr);
    EXPECT_EQ(t.mrCacheStats().misses, 4u);
    t.release(rb2);  // b unpinned and over the bound: evicted
    EXPECT_EQ(t.mrCacheStats().evictions, 2u);
    EXPECT_EQ(t.mrCacheStats().entries, 2u);
    t.release(rc);
    t.release(ra3);
    EXPECT_EQ(t.mrCacheStats().entries, 2u);
    // Keys differ between live registrations (we choose them without FI_MR_PROV_KEY).
    MemoryRegion* x = t.registerMemory(a.p, 10);
    MemoryRegion* y = t.registerMemory(c.p, 10);
    ASSERT_TRUE(x && y);
    EXPECT_NE(x->key, y->key);
    t.release(x);
    t.release(y);
  });
}

TEST(OfiMrCache, RejectsBadArguments) {
  runThreads(1, {}, [&](int, Transport& t, ThreadGroup&) {
    conflux::Status err;
    EXPECT_EQ(t.registerMemory(nullptr, 10, 0, &err), nullptr);
    EXPECT_EQ(err.code(), conflux::Code::InvalidArgument);
    uint8_t b[16];
    EXPECT_EQ(t.registerMemory(b, 16, 3, &err), nullptr);
  });
}

}  // namespace
