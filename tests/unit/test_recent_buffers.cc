// RecentBuffers (src/recent_buffers.h): which receive buffers count as still in cache.
//   - never touched: cold; touched by the last call: warm;
//   - a sweep's shifted buffers (each call one size further along the allocation): cold;
//   - a buffer touched before more than the budget's worth of other buffers: cold; within it: warm;
//     a caller's stricter budget (warmWithin) counts less;
//   - half or more of the range covered: warm; less: cold;
//   - only the newest 32 ranges (16 calls) are kept;
//   - a call in place (its buffers overlap) is never cold and is recorded as one range;
//   - lastLevelCacheBytes reads a plausible size where sysfs describes the caches.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>

#include "src/recent_buffers.h"

namespace {

using conflux::RecentBuffers;

constexpr uint64_t kMiB = uint64_t{1} << 20;

const void* at(uint64_t offset) { return reinterpret_cast<const void*>(uintptr_t{1} << 40 | offset); }

TEST(RecentBuffers, NeverTouchedIsColdAndTheLastCallsBuffersAreWarm) {
  RecentBuffers recent(16 * kMiB);
  EXPECT_FALSE(recent.warm(at(0), kMiB));
  recent.touch(at(0), kMiB);
  recent.touch(at(8 * kMiB), kMiB);
  EXPECT_TRUE(recent.warm(at(0), kMiB));
  EXPECT_TRUE(recent.warm(at(8 * kMiB), kMiB));
  EXPECT_TRUE(recent.warm(at(0), 0)) << "nothing to write is never cold";
}

TEST(RecentBuffers, ASweepsShiftedBuffersAreColdAndARepeatedOneIsWarm) {
  RecentBuffers recent(16 * kMiB);
  const uint64_t send = 0, recv = 256 * kMiB;
  for (uint64_t i = 0; i < 40; ++i) {
    const uint64_t shift = i * kMiB;
    if (i > 0) {
      EXPECT_FALSE(recent.warm(at(recv + shift), kMiB)) << "call " << i;
    }
    recent.touch(at(send + shift), kMiB);
    recent.touch(at(recv + shift), kMiB);
  }
  for (int i = 0; i < 5; ++i) {
    recent.touch(at(send), 4 * kMiB);
    recent.touch(at(recv), 4 * kMiB);
    EXPECT_TRUE(recent.warm(at(recv), 4 * kMiB)) << "repeat " << i;
  }
}

TEST(RecentBuffers, TheBudgetBoundsHowFarBackABufferCounts) {
  RecentBuffers recent(8 * kMiB);
  recent.touch(at(0), kMiB);
  recent.touch(at(100 * kMiB), 6 * kMiB);
  EXPECT_TRUE(recent.warm(at(0), kMiB)) << "7 MiB touched since, within 8";
  recent.touch(at(200 * kMiB), 2 * kMiB);
  EXPECT_FALSE(recent.warm(at(0), kMiB)) << "9 MiB touched since";
  RecentBuffers none(0);
  none.touch(at(0), kMiB);
  EXPECT_FALSE(none.warm(at(0), kMiB)) << "no cache: nothing is warm";
}

TEST(RecentBuffers, AStricterBudgetOfTheCallersCountsLessHistory) {
  RecentBuffers recent(8 * kMiB);
  recent.touch(at(0), kMiB);
  recent.touch(at(100 * kMiB), 2 * kMiB);
  EXPECT_TRUE(recent.warm(at(0), kMiB)) << "3 MiB within the budget of 8";
  EXPECT_FALSE(recent.warmWithin(at(0), kMiB, 2 * kMiB)) << "3 MiB beyond a budget of 2";
  EXPECT_TRUE(recent.warmWithin(at(100 * kMiB), 2 * kMiB, 2 * kMiB)) << "the newest range alone fits 2";
  EXPECT_EQ(recent.budget(), 8 * kMiB);
}

TEST(RecentBuffers, HalfTheRangeCoveredIsWarm) {
  RecentBuffers recent(64 * kMiB);
  recent.touch(at(0), 4 * kMiB);
  EXPECT_TRUE(recent.warm(at(2 * kMiB), 4 * kMiB)) << "half covered";
  EXPECT_FALSE(recent.warm(at(3 * kMiB), 4 * kMiB)) << "a quarter covered";
  recent.touch(at(5 * kMiB), kMiB);
  EXPECT_TRUE(recent.warm(at(3 * kMiB), 4 * kMiB)) << "two ranges cover half between them";
}

TEST(RecentBuffers, OnlyTheNewestThirtyTwoRangesAreKept) {
  RecentBuffers recent(1024 * kMiB);
  recent.touch(at(0), 4096);
  for (uint64_t i = 1; i <= 31; ++i) recent.touch(at(i * kMiB), 4096);
  EXPECT_TRUE(recent.warm(at(0), 4096));
  recent.touch(at(32 * kMiB), 4096);
  EXPECT_FALSE(recent.warm(at(0), 4096)) << "the 33rd range pushed out the first";
  EXPECT_TRUE(recent.warm(at(kMiB), 4096));
}

TEST(RecentBuffers, ACallInPlaceIsNeverColdAndIsRecordedOnce) {
  RecentBuffers recent(4 * kMiB);
  EXPECT_FALSE(recent.recordCall(at(0), kMiB, at(0), kMiB)) << "one buffer";
  EXPECT_FALSE(recent.recordCall(at(10 * kMiB + kMiB), kMiB, at(10 * kMiB), 3 * kMiB)) << "all-gather in place";
  EXPECT_FALSE(recent.recordCall(at(20 * kMiB), 3 * kMiB, at(20 * kMiB + kMiB), kMiB)) << "reduce-scatter in place";
  EXPECT_TRUE(recent.warm(at(20 * kMiB), 3 * kMiB)) << "the union, 3 MiB, within the 4 MiB budget";
  EXPECT_TRUE(recent.recordCall(at(30 * kMiB), kMiB, at(40 * kMiB), kMiB)) << "out of place, never touched";
  EXPECT_FALSE(recent.recordCall(at(30 * kMiB), kMiB, at(40 * kMiB), kMiB)) << "out of place, repeated";
}

TEST(RecentBuffers, LastLevelCacheSizeFromSysfs) {
  const uint64_t bytes = conflux::lastLevelCacheBytes();
  if (!std::ifstream("/sys/devices/system/cpu/cpu0/cache/index0/size")) {
    EXPECT_EQ(bytes, 0u) << "no sysfs cache description: unknown";
    return;
  }
  EXPECT_GE(bytes, uint64_t{64} << 10);
  EXPECT_LE(bytes, uint64_t{4} << 30);
}

}  // namespace
