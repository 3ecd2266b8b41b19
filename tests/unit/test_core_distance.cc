// The cores' distance from barrier handoffs (transport/shm/core_distance.h): the verdict's rule on given
// samples, and the samples two real processes take at shared-memory barriers.
#include "transport/shm/core_distance.h"

#include <atomic>
#include <cstdio>

#include "test_shm_util.h"

using conflux::shm::CoreDistance;
using conflux::shm::ShmWorld;
using namespace shmtest;

using conflux::shm::barrierStamp;
using conflux::shm::handoffSample;

// Samples 1 us apart (steady-clock ns), far below the staleness limit.
struct Feed {
  CoreDistance d;
  int64_t now = 1000000;
  bool add(int64_t ns) { return d.add(ns, now += 1000); }
  bool far() const { return d.far(now); }
};

TEST(CoreDistance, FarOnlyAfterAFullWindowOfSlowHandoffs) {
  Feed f;
  EXPECT_FALSE(f.far());
  EXPECT_EQ(f.d.lowest(), 0);
  for (int i = 0; i < CoreDistance::kWindow - 1; ++i) {
    EXPECT_FALSE(f.add(300)) << i;
    EXPECT_FALSE(f.far()) << "far after " << i + 1 << " samples, before a full window";
  }
  EXPECT_TRUE(f.add(CoreDistance::kFarNs));  // the window is full, its lowest sample at the threshold
  EXPECT_TRUE(f.far());
  EXPECT_EQ(f.d.lowest(), CoreDistance::kFarNs);
  EXPECT_EQ(f.d.samples(), uint64_t(CoreDistance::kWindow));
}

TEST(CoreDistance, OneFastHandoffMeansClose) {
  Feed f;
  for (int i = 0; i < CoreDistance::kWindow; ++i) f.add(500);
  ASSERT_TRUE(f.far());
  EXPECT_FALSE(f.add(CoreDistance::kCloseNs));  // between the thresholds: the verdict holds
  EXPECT_TRUE(f.far());
  EXPECT_TRUE(f.add(CoreDistance::kCloseNs - 1));
  EXPECT_FALSE(f.far());
  EXPECT_EQ(f.d.lowest(), CoreDistance::kCloseNs - 1);
  // Close, a window whose lowest lies between the thresholds does not make it far again.
  for (int i = 0; i < CoreDistance::kWindow; ++i) f.add(CoreDistance::kFarNs - 1);
  EXPECT_FALSE(f.far());
  for (int i = 0; i < CoreDistance::kWindow - 1; ++i) EXPECT_FALSE(f.add(CoreDistance::kFarNs)) << i;
  EXPECT_TRUE(f.add(CoreDistance::kFarNs));  // now the whole window is at or above the threshold
  EXPECT_TRUE(f.far());
}

TEST(CoreDistance, SlowSamplesAgeOutOfTheWindow) {
  Feed f;
  f.add(50);
  for (int i = 0; i < CoreDistance::kWindow - 1; ++i) f.add(400);
  EXPECT_FALSE(f.far());  // the 50 ns sample is still in the window
  EXPECT_EQ(f.d.lowest(), 50);
  EXPECT_TRUE(f.add(400));  // it has left
  EXPECT_TRUE(f.far());
  EXPECT_EQ(f.d.lowest(), 400);
}

TEST(CoreDistance, NegativeAndOverlongSamplesAreIgnored) {
  Feed f;
  for (int i = 0; i < 3 * CoreDistance::kWindow; ++i) {
    EXPECT_FALSE(f.add(-5));
    EXPECT_FALSE(f.add(CoreDistance::kMaxSampleNs + 1));  // a late peer or a wake-up, not a handoff
  }
  EXPECT_EQ(f.d.samples(), 0u);
  EXPECT_FALSE(f.far());
}

TEST(CoreDistance, AVerdictWithoutRecentSamplesIsForgotten) {
  Feed f;
  for (int i = 0; i < CoreDistance::kWindow; ++i) f.add(400);
  ASSERT_TRUE(f.far());
  f.now += CoreDistance::kStaleNs;  // no wait at a barrier for a second
  EXPECT_FALSE(f.far());
  // The old samples are gone: one slow sample is not a full window.
  f.add(400);
  EXPECT_FALSE(f.far());
  EXPECT_EQ(f.d.samples(), 1u);
  for (int i = 0; i < CoreDistance::kWindow - 1; ++i) f.add(400);
  EXPECT_TRUE(f.far());
}

TEST(CoreDistance, HandoffSampleIsNowMinusTheLatestStampOfThisGeneration) {
  const uint64_t gen = 7;
  const uint64_t s[3] = {barrierStamp(gen, 1000), barrierStamp(gen, 1300), barrierStamp(gen, 1200)};
  EXPECT_EQ(handoffSample(s, 3, gen, 1500), 200);  // the last arrival: 1300
  EXPECT_EQ(handoffSample(s, 1, gen, 1500), 500);
  // Another generation's stamp (a peer's earlier arrival in that slot): no sample.
  const uint64_t mixed[2] = {barrierStamp(gen, 1000), barrierStamp(gen - 2, 1400)};
  EXPECT_EQ(handoffSample(mixed, 2, gen, 1500), -1);
  // The tag is the generation's low bits: generation 2^16 + 7 has tag 7.
  EXPECT_EQ(handoffSample(s, 3, gen + (uint64_t{1} << 16), 1500), 200);
  // A stamp ahead of now (a peer's clock ahead of ours): no sample.
  EXPECT_EQ(handoffSample(s, 3, gen, 1250), -1);
  EXPECT_EQ(handoffSample(s, 0, gen, 1500), -1);
}

TEST(CoreDistance, HandoffSampleWrapsWithTheStampsClock) {
  const uint64_t gen = 3, top = conflux::shm::kStampNsMask;  // the stamps' clock wraps at 2^48 ns
  const uint64_t s[2] = {barrierStamp(gen, top - 100), barrierStamp(gen, 50)};  // 50 is after the wrap
  EXPECT_EQ(handoffSample(s, 2, gen, top + 1 + 80), 30);  // now, past 2^48: 80 in the stamps' clock
  const uint64_t r[2] = {barrierStamp(gen, 50), barrierStamp(gen, top - 100)};
  EXPECT_EQ(handoffSample(r, 2, gen, top + 1 + 80), 30);  // the later one wins in either order
}

// Two processes meet at barriers; rank 1 arrives late every other time, so rank 0 waits there and times
// the handoff (samples from its other waits count too). Each sample is the time from the last arrival
// to the waiter seeing it: rank 0 collects a window of them (on a loaded machine it may need more
// rounds: it tells rank 1 through its staging when it has them), and its lowest is positive and at most
// kMaxSampleNs (longer ones are not recorded).
TEST(ShmBarrier, WaitsTimeTheLastArrivalsHandoff) {
  TempDir dir;
  const std::string tag = makeTag();
  Ranks ranks(2);
  ranks.run([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir.path, tag, rank, 2, 4096, 4096), ranks.exchange(rank));
    // Rank 0's staging word: the round after which both stop (0: not yet). Written before rank 0 arrives
    // at that round's barrier, read by rank 1 after it completes.
    std::atomic_ref<uint64_t> stopAfter(*reinterpret_cast<uint64_t*>(w->staging(0, 0)));
    if (rank == 0) stopAfter.store(0, std::memory_order_relaxed);
    const uint64_t g0 = w->barrierArrive();
    SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g0); }));
    const double end = nowUs() + 20e6;
    for (uint64_t i = 1;; ++i) {
      SHM_CHECK(nowUs() < end);
      if (rank == 1 && i % 2 == 0) {
        const double until = nowUs() + 2;  // arrive late: rank 0 is polling by then
        while (nowUs() < until) {
        }
      }
      if (rank == 0 && i >= 400 && w->coreDistance().samples() >= uint64_t(CoreDistance::kWindow) &&
          stopAfter.load(std::memory_order_relaxed) == 0) {
        stopAfter.store(i, std::memory_order_relaxed);
      }
      const uint64_t g = w->barrierArrive();
      bool waited = false;
      while (!w->barrierReached(g)) {
        waited = true;
        SHM_CHECK(nowUs() < end);
      }
      if (waited) w->noteBarrierSeen(g);
      const uint64_t stop = stopAfter.load(std::memory_order_relaxed);
      if (stop != 0 && i >= stop) break;
    }
    if (rank == 0) {
      const CoreDistance& d = w->coreDistance();
      std::printf("[ShmBarrier] %llu handoffs timed, lowest of the last %d: %lld ns\n",
                  static_cast<unsigned long long>(d.samples()), CoreDistance::kWindow,
                  static_cast<long long>(d.lowest()));
      SHM_CHECK(d.samples() >= uint64_t(CoreDistance::kWindow));
      SHM_CHECK(d.lowest() > 0 && d.lowest() <= CoreDistance::kMaxSampleNs);
    }
  });
}
