// The cores' distance from barrier handoffs (transport/shm/core_distance.h): the verdict's rule on given
// samples, and the samples two real processes take at shared-memory barriers.
#include "transport/shm/core_distance.h"

#include <cstdio>

#include "test_shm_util.h"

using conflux::shm::CoreDistance;
using conflux::shm::ShmWorld;
using namespace shmtest;

TEST(CoreDistance, FarOnlyAfterAFullWindowOfSlowHandoffs) {
  CoreDistance d;
  EXPECT_FALSE(d.far());
  EXPECT_EQ(d.lowest(), 0);
  for (int i = 0; i < CoreDistance::kWindow - 1; ++i) {
    EXPECT_FALSE(d.add(300)) << i;
    EXPECT_FALSE(d.far()) << "far after " << i + 1 << " samples, before a full window";
  }
  EXPECT_TRUE(d.add(CoreDistance::kFarNs));  // the window is full, its lowest sample at the threshold
  EXPECT_TRUE(d.far());
  EXPECT_EQ(d.lowest(), CoreDistance::kFarNs);
  EXPECT_EQ(d.samples(), uint64_t(CoreDistance::kWindow));
}

TEST(CoreDistance, OneFastHandoffMeansClose) {
  CoreDistance d;
  for (int i = 0; i < CoreDistance::kWindow; ++i) d.add(500);
  ASSERT_TRUE(d.far());
  EXPECT_FALSE(d.add(CoreDistance::kCloseNs));  // between the thresholds: the verdict holds
  EXPECT_TRUE(d.far());
  EXPECT_TRUE(d.add(CoreDistance::kCloseNs - 1));
  EXPECT_FALSE(d.far());
  EXPECT_EQ(d.lowest(), CoreDistance::kCloseNs - 1);
  // Close, a window whose lowest lies between the thresholds does not make it far again.
  for (int i = 0; i < CoreDistance::kWindow; ++i) d.add(CoreDistance::kFarNs - 1);
  EXPECT_FALSE(d.far());
  for (int i = 0; i < CoreDistance::kWindow - 1; ++i) EXPECT_FALSE(d.add(CoreDistance::kFarNs)) << i;
  EXPECT_TRUE(d.add(CoreDistance::kFarNs));  // now the whole window is at or above the threshold
  EXPECT_TRUE(d.far());
}

TEST(CoreDistance, SlowSamplesAgeOutOfTheWindow) {
  CoreDistance d;
  d.add(50);
  for (int i = 0; i < CoreDistance::kWindow - 1; ++i) d.add(400);
  EXPECT_FALSE(d.far());  // the 50 ns sample is still in the window
  EXPECT_EQ(d.lowest(), 50);
  EXPECT_TRUE(d.add(400));  // it has left
  EXPECT_TRUE(d.far());
  EXPECT_EQ(d.lowest(), 400);
}

TEST(CoreDistance, NegativeSamplesAreIgnored) {
  CoreDistance d;
  for (int i = 0; i < 3 * CoreDistance::kWindow; ++i) EXPECT_FALSE(d.add(-5));
  EXPECT_EQ(d.samples(), 0u);
  EXPECT_FALSE(d.far());
}

// Two processes meet at barriers; rank 1 arrives late every other time, so rank 0 waits there and times
// the handoff. Each sample is the time from rank 1's arrival to rank 0 seeing it: positive, and far
// below a millisecond on an idle machine (the lowest one is printed). A barrier whose peer already
// arrived at the next one gives no sample (its stamp is the next barrier's).
TEST(ShmBarrier, WaitsTimeTheLastArrivalsHandoff) {
  TempDir dir;
  const std::string tag = makeTag();
  Ranks ranks(2);
  ranks.run([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir.path, tag, rank, 2, 4096, 4096), ranks.exchange(rank));
    // A stale stamp: rank 0 polls barrier 1 in vain, then lets rank 1 arrive at barrier 2 first.
    uint64_t g = w->barrierArrive();
    if (rank == 0) {
      SHM_CHECK(waitFor(*w, [&] { return w->barrierReachedBy(1, g + 1); }, 2000));
      SHM_CHECK(w->barrierReached(g));
      w->noteBarrierSeen(g);
      SHM_CHECK(w->coreDistance().samples() == 0);
      g = w->barrierArrive();
      SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }, 2000));
    } else {
      SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }, 2000));
      g = w->barrierArrive();
      SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }, 2000));
    }
    constexpr int kRounds = 400;
    for (int i = 0; i < kRounds; ++i) {
      if (rank == 1 && i % 2 == 0) {
        const double until = nowUs() + 5;  // arrive late: rank 0 is polling by then
        while (nowUs() < until) {
        }
      }
      g = w->barrierArrive();
      bool waited = false;
      const double deadline = nowUs() + 20e6;
      while (!w->barrierReached(g)) {
        waited = true;
        SHM_CHECK(nowUs() < deadline);
      }
      if (waited) w->noteBarrierSeen(g);
    }
    if (rank == 0) {
      const CoreDistance& d = w->coreDistance();
      std::printf("[ShmBarrier] %llu handoffs timed, lowest of the last %d: %lld ns (cores %s)\n",
                  static_cast<unsigned long long>(d.samples()), CoreDistance::kWindow,
                  static_cast<long long>(d.lowest()), d.far() ? "far apart" : "close together");
      SHM_CHECK(d.samples() >= uint64_t(kRounds / 4));
      SHM_CHECK(d.lowest() > 0 && d.lowest() < 1000000);
      SHM_CHECK(w->coresFarApart() == d.far());
    }
  });
}
