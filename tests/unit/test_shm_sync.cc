// Waiting and failure detection: doorbell sleep/wake (timeouts, no lost wake-ups, cross-process wake
// latency), the barrier with 8 processes on 2 cores (time per barrier printed), and dead-peer detection.
#include <poll.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>

#include "test_shm_util.h"
#include "transport/shm/liveness.h"

using conflux::shm::PeerLiveness;
using conflux::shm::ShmWorld;
using namespace shmtest;

TEST(ShmDoorbell, SleepTimesOutAndReturnsOnStaleValue) {
  TempDir dir;
  auto w = ShmWorld::create(smallConfig(dir.path, makeTag(), 0, 1), soloExchange());
  const uint32_t seen = w->doorbell();
  double t0 = nowUs();
  w->sleep(seen, 50);
  double ms = (nowUs() - t0) / 1e3;
  EXPECT_GE(ms, 45.0);
  EXPECT_LT(ms, 1000.0);
  t0 = nowUs();
  w->sleep(seen + 1, 5000);  // stale: the doorbell already differs
  w->sleep(seen, 0);         // zero timeout: no wait
  EXPECT_LT((nowUs() - t0) / 1e3, 100.0);
}

TEST(ShmDoorbell, WakeSelfFromAnotherThread) {
  TempDir dir;
  auto w = ShmWorld::create(smallConfig(dir.path, makeTag(), 0, 1), soloExchange());
  for (int round = 0; round < 5; ++round) {
    std::atomic<bool> ready{false};
    double wokeAt = 0;
    const uint32_t seen = w->doorbell();
    std::thread sleeper([&] {
      ready = true;
      w->sleep(seen, 10000);
      wokeAt = nowUs();
    });
    while (!ready) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const double rangAt = nowUs();
    w->wakeSelf();
    sleeper.join();
    EXPECT_LT(wokeAt - rangAt, 100e3) << "a woken sleeper must not wait for its timeout";
  }
}

TEST(ShmDoorbell, CrossProcessWakeIsPrompt) {
  TempDir dir;
  const std::string tag = makeTag();
  Ranks ranks(2);
  ranks.run([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir.path, tag, rank, 2), ranks.exchange(rank));
    std::vector<double> lat;
    for (int i = 0; i < 30; ++i) {
      if (rank == 0) {
        ::usleep(2000);  // let rank 1 fall asleep
        ranks.area().values[0][0] = nowUs();
      }
      const uint64_t g = w->barrierArrive();
      SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }, 0));  // sleep at once
      if (rank == 1) lat.push_back(nowUs() - ranks.area().values[0][0]);
    }
    if (rank == 1) {
      std::sort(lat.begin(), lat.end());
      std::printf("[ShmDoorbell] cross-process wake latency: median %.1f us, max %.1f us\n", lat[lat.size() / 2],
                  lat.back());
      SHM_CHECK(lat.back() < 200e3);
    }
  });
}

TEST(ShmDoorbell, WakePeerAfterStagingFlag) {
  // The direct-algorithm pattern: a flag in the sender's staging (release store) plus wakePeer(); the
  // waiter reads its doorbell, then the flag (acquire), then sleeps.
  TempDir dir;
  const std::string tag = makeTag();
  Ranks ranks(2);
  ranks.run([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir.path, tag, rank, 2), ranks.exchange(rank));
    auto flag = [&](int r) { return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(w->staging(r, 0))); };
    for (uint64_t i = 1; i <= 2000; ++i) {
      if ((i % 2 == 1) == (rank == 0)) {  // take turns
        flag(rank).store(i, std::memory_order_release);
        w->wakePeer(1 - rank);
      } else {
        SHM_CHECK(waitFor(*w, [&] { return flag(1 - rank).load(std::memory_order_acquire) >= i; }, 0, 5000));
      }
    }
  });
}

TEST(ShmDoorbell, NoLostWakeupsUnderPingPong) {
  // Both sides always sleep (no spinning) with a long timeout; a lost wake-up shows as a sleep that ran
  // into its timeout.
  TempDir dir;
  const std::string tag = makeTag();
  Ranks ranks(2);
  ranks.run([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir.path, tag, rank, 2), ranks.exchange(rank));
    auto& out = w->sendTo(1 - rank);
    auto& in = w->recvFrom(1 - rank);
    int longSleeps = 0;
    const double t0 = nowUs();
    constexpr int kRounds = 5000;
    for (int i = 0; i < kRounds; ++i) {
      uint32_t msg = i;
      if (rank == 0) SHM_CHECK(out.write(&msg, 4) == 4);
      for (;;) {
        const uint32_t seen = w->doorbell();
        if (in.readable(4).size() == 4) break;
        const double s0 = nowUs();
        w->sleep(seen, 3000);
        if (nowUs() - s0 > 1.5e6) ++longSleeps;
      }
      std::memcpy(&msg, in.readable(4).data(), 4);
      in.consume(4);
      SHM_CHECK(msg == static_cast<uint32_t>(i));
      if (rank == 1) SHM_CHECK(out.write(&msg, 4) == 4);
    }
    if (rank == 0)
      std::printf("[ShmDoorbell] %d sleep-only round trips: %.1f us each\n", kRounds, (nowUs() - t0) / kRounds);
    SHM_CHECK(longSleeps == 0);
  });
}

TEST(ShmBarrier, ManyRoundsEightProcesses) {
  TempDir dir;
  const std::string tag = makeTag();
  constexpr int kRanks = 8;
  Ranks ranks(kRanks);
  ranks.run([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir.path, tag, rank, kRanks, 4096, 4096), ranks.exchange(rank));
    uint64_t round = 0;
    auto barrierRounds = [&](int rounds, int spin, const char* label) {
      const double t0 = nowUs();
      for (int i = 0; i < rounds; ++i) {
        ++round;
        // Publish the round before arriving; after the barrier every peer must have published it.
        std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(w->staging(rank, 0)))
            .store(round, std::memory_order_relaxed);
        const uint64_t g = w->barrierArrive();
        SHM_CHECK(waitFor(*w, [&] { return w->barrierReached(g); }, spin));
        for (int p = 0; p < kRanks; ++p)
          SHM_CHECK(std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(w->staging(p, 0)))
                        .load(std::memory_order_relaxed) >= round);
      }
      if (rank == 0)
        std::printf("[ShmBarrier] %d processes, %s: %.1f us per barrier (%d rounds)\n", kRanks, label,
                    (nowUs() - t0) / rounds, rounds);
    };
    barrierRounds(2000, 0, "sleep at once");
    barrierRounds(2000, 50, "spin 50 polls, then sleep");
    barrierRounds(300, 2000, "spin 2000 polls (CONFLUX_SPIN_COUNT default), then sleep");
  });
}

TEST(ShmLiveness, DetectsKilledPeerWhileZombie) {
  TempDir dir;
  const std::string tag = makeTag();
  Ranks ranks(3);
  auto& words = ranks.area().words;
  ranks.start([&](int rank) {
    auto w = ShmWorld::create(smallConfig(dir.path, tag, rank, 3), ranks.exchange(rank));
    if (rank == 1) {
      for (;;) ::pause();  // the victim
    }
    SHM_CHECK(w->deadPeers().empty());
    words[0].fetch_add(1);  // ready
    const double deadline = nowUs() + 10e6;
    while (words[1].load() == 0) ::usleep(200);
    const double killedAt = ranks.area().values[0][0];
    int dead = -1;
    while (nowUs() < deadline) {
      const std::vector<int> d = w->deadPeers();
      if (!d.empty()) {
        dead = d.front();
        break;
      }
      ::usleep(1000);
    }
    const double ms = (nowUs() - killedAt) / 1e3;
    SHM_CHECK(dead == 1);
    // Still a zombie: the parent reaps it only after we exit. The procfs fallback must agree.
    SHM_CHECK(PeerLiveness::exitedByProcfs(static_cast<pid_t>(words[2].load())));
    std::printf("[ShmLiveness] rank %d saw the SIGKILLed peer dead after %.2f ms\n", rank, ms);
    SHM_CHECK(ms < 2000);
    words[3].fetch_add(1);  // stay alive until both watchers are done (else one would see the other exit)
    while (words[3].load() < 2 && nowUs() < deadline) ::usleep(200);
  });
  const double deadline = nowUs() + 20e6;
  while (words[0].load() < 2 && nowUs() < deadline) ::usleep(1000);
  ASSERT_EQ(words[0].load(), 2u);
  words[2].store(static_cast<uint64_t>(ranks.pid(1)));
  ranks.area().values[0][0] = nowUs();
  ASSERT_EQ(::kill(ranks.pid(1), SIGKILL), 0);
  words[1].store(1);
  EXPECT_EQ(ranks.wait(0), 0);
  EXPECT_EQ(ranks.wait(2), 0);
  EXPECT_EQ(ranks.wait(1), 128 + SIGKILL);
  EXPECT_EQ(countSegments(dir.path, tag), 0);
}

TEST(ShmLiveness, PidfdAndProcfsSeeZombieAndReapedChild) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  EXPECT_FALSE(PeerLiveness::exitedByProcfs(::getpid()));
  {
    PeerLiveness self;
    self.watch({0, ::getpid()});
    EXPECT_TRUE(self.allDead().empty());
  }
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);  // exited, not reaped: a zombie
  EXPECT_TRUE(PeerLiveness::exitedByProcfs(child));
  const int fd = PeerLiveness::openPidfd(child);
  if (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 1);
    ::close(fd);
  }
  PeerLiveness watcher;
  watcher.watch({0, 0, child});
  EXPECT_EQ(watcher.allDead(), std::vector<int>{2});
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_TRUE(PeerLiveness::exitedByProcfs(child));
  EXPECT_EQ(watcher.allDead(), std::vector<int>{2});
}
