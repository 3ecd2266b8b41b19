// cfxCommShrink on real processes: after a rank is killed (or stopped), the survivors make a communicator
// without it and every collective, datatype and op is right on it; the leader may be the rank that died;
// across simulated nodes the shrunk communicator sends through the parent's endpoints; survivors that
// disagree, or one that never comes, fail within the timeout instead of hanging; bad arguments are named;
// nothing is left in /dev/shm.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "conflux/conflux.hpp"
#include "tests/multiproc/collective_cases.h"
#include "tests/multiproc/harness.h"
#include "tests/multiproc/init_logs.h"

using namespace conflux::testing;
using Clock = std::chrono::steady_clock;

namespace {

double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

/// All-reduces until a call fails (the victim dies meanwhile) or `limitMs` passes; the failing result.
cfxResult_t allReduceUntilError(cfxComm_t comm, double limitMs) {
  std::vector<float> buf(1 << 15, 1.0f);  // 128 KiB: a plan (eager takes at most 64 KiB)
  const auto start = Clock::now();
  cfxResult_t r = cfxSuccess;
  while (r == cfxSuccess && msSince(start) < limitMs) {
    r = cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr);
  }
  return r;
}

/// Kills rank `victim` with `sig` once every rank has a communicator (markInitialized) and the ranks
/// have called for a while. A fixed delay of 1.2 s from the fork let a slow init (ASan on a loaded
/// machine) lose the victim during init.
RunOptions killing(int victim, int sig = SIGKILL, std::vector<std::pair<std::string, std::string>> env = {}) {
  RunOptions opts;
  opts.env = std::move(env);
  // A stopped victim stays stopped 12 s: the survivors time out on it, shrink and finish meanwhile.
  opts.whileRunning = faultAfterInit(victim, sig, 700, 12000);
  return opts;
}

/// The new communicator's shape and a small sum over it: each survivor adds its parent rank.
void expectShape(cfxComm_t shrunk, const std::vector<int>& survivors, int parentRank) {
  int size = 0, rank = -1;
  EXPECT_EQ(cfxCommCount(shrunk, &size), cfxSuccess);
  EXPECT_EQ(cfxCommUserRank(shrunk, &rank), cfxSuccess);
  EXPECT_EQ(size, int(survivors.size()));
  EXPECT_EQ(rank, int(std::find(survivors.begin(), survivors.end(), parentRank) - survivors.begin()))
      << "survivors keep their order";
  int64_t want = 0;
  for (int r : survivors) want += r;
  std::vector<int64_t> v(70001, parentRank);
  EXPECT_EQ(cfxAllReduce(v.data(), v.data(), v.size(), cfxInt64, cfxSum, shrunk, nullptr), cfxSuccess)
      << cfxGetLastError(shrunk);
  EXPECT_EQ(v.front(), want);
  EXPECT_EQ(v.back(), want);
}

/// A survivor's whole part after `victim` was killed: the parent fails, the survivors shrink it and run
/// the sweep (every collective, datatype and op, in and out of place) on the result.
int surviveAndShrink(cfxComm_t parent, int rank, int victim, const std::vector<int>& survivors, const Sweep& sweep) {
  EXPECT_NE(allReduceUntilError(parent, 30000), cfxSuccess) << "rank " << rank << ": the parent never failed";
  cfxComm_t shrunk = nullptr;
  const auto t0 = Clock::now();
  EXPECT_EQ(cfxCommShrink(parent, &victim, 1, &shrunk, nullptr), cfxSuccess) << cfxGetLastError(parent);
  std::fprintf(stderr, "rank %d: shrink took %.0f ms\n", rank, msSince(t0));
  if (shrunk == nullptr) return 1;
  expectShape(shrunk, survivors, rank);
  EXPECT_EQ(runSweep(shrunk, sweep), 0);
  EXPECT_EQ(cfxCommDestroy(shrunk), cfxSuccess);
  EXPECT_EQ(cfxCommDestroy(parent), cfxSuccess);
  return 0;
}

Sweep smallSweep() { return fullSweep({1, 5, 16411}); }  // 16411: a plan for 4- and 8-byte types

/// /dev/shm files that appeared since `before` and stay for a second (parallel tests make short-lived
/// segments of their own during init).
std::vector<std::string> leakedSince(const std::vector<std::string>& before) {
  auto fresh = [&] {
    std::vector<std::string> out;
    for (const auto& f : shmFiles()) {
      if (std::find(before.begin(), before.end(), f) == before.end()) out.push_back(f);
    }
    return out;
  };
  std::vector<std::string> left = fresh();
  for (int i = 0; i < 20 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    left = fresh();
  }
  return left;
}

// One node, 5 ranks: rank 2 is killed mid-call; ranks 0, 1, 3, 4 shrink (led by rank 0) and the new
// communicator of 4 passes the whole sweep.
TEST(CommShrink, SurvivorsOfAKilledRankCarryOn) {
  const auto before = shmFiles();
  auto out = runRanks(5, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    markInitialized();
    return surviveAndShrink(comm, rank, 2, {0, 1, 3, 4}, smallSweep());
  }, killing(2));
  for (int r : {0, 1, 3, 4}) EXPECT_TRUE(out[size_t(r)].ok()) << out[size_t(r)].describe();
  EXPECT_EQ(out[2].signal, SIGKILL);
  for (const auto& f : leakedSince(before)) ADD_FAILURE() << "leaked /dev/shm/" << f;
}

// The rank that would lead (the lowest, rank 0) is the one killed: rank 1 leads.
TEST(CommShrink, TheLowestRankDiesAndTheNextLeads) {
  auto out = runRanks(3, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    markInitialized();
    return surviveAndShrink(comm, rank, 0, {1, 2}, fullSweep({3, 70001}));
  }, killing(0));
  EXPECT_TRUE(out[1].ok()) << out[1].describe();
  EXPECT_TRUE(out[2].ok()) << out[2].describe();
  EXPECT_EQ(out[0].signal, SIGKILL);
}

// A rank that stops (SIGSTOP: alive, silent) times the survivors out; they shrink it away and go on
// while it is still stopped.
TEST(CommShrink, AStoppedRankIsShrunkAway) {
  auto out = runRanks(3, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxConfig_t cfg = CFX_CONFIG_INITIALIZER;
    cfg.timeoutMs = 1500;
    cfxComm_t comm;
    if (cfxCommInitRankConfig(&comm, n, id, rank, &cfg) != cfxSuccess) return 2;
    markInitialized();
    if (rank == 1) {  // runs until it is stopped, then killed
      std::vector<float> buf(1 << 14, 1.0f);
      for (;;) cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr);
    }
    return surviveAndShrink(comm, rank, 1, {0, 2}, fullSweep({7}));
  }, killing(1, SIGSTOP));
  EXPECT_TRUE(out[0].ok()) << out[0].describe();
  EXPECT_TRUE(out[2].ok()) << out[2].describe();
}

// No failure: a healthy communicator of 4 shrinks to {0, 2, 3} while rank 1 does other work, then that
// one shrinks to {0, 3}, and the parent, with everyone, still works afterwards (the recovery point is
// reused: rank 0 leads every time). An empty list makes a copy.
TEST(CommShrink, AHealthyCommunicatorShrinksAgainAndAgain) {
  auto out = runRanks(4, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    cfxComm_t copy = nullptr;
    EXPECT_EQ(cfxCommShrink(comm, nullptr, 0, &copy, nullptr), cfxSuccess) << cfxGetLastError(comm);
    if (copy == nullptr) return 1;
    expectShape(copy, {0, 1, 2, 3}, rank);
    if (rank != 1) {
      const int one = 1;
      cfxComm_t three = nullptr, two = nullptr;
      EXPECT_EQ(cfxCommShrink(comm, &one, 1, &three, nullptr), cfxSuccess) << cfxGetLastError(comm);
      if (three == nullptr) return 1;
      expectShape(three, {0, 2, 3}, rank);
      if (rank != 2) {
        const int middle = 1;  // rank 2 of the parent is rank 1 of `three`
        EXPECT_EQ(cfxCommShrink(three, &middle, 1, &two, nullptr), cfxSuccess) << cfxGetLastError(three);
        if (two == nullptr) return 1;
        expectShape(two, {0, 3}, rank);
        EXPECT_EQ(cfxCommDestroy(two), cfxSuccess);
      }
      EXPECT_EQ(cfxCommDestroy(three), cfxSuccess);
    }
    expectShape(comm, {0, 1, 2, 3}, rank);
    EXPECT_EQ(cfxCommDestroy(copy), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

// Survivors that disagree on who is excluded cannot join each other, and one that never comes is named:
// every caller fails within its timeout, with a message that says what to check.
TEST(CommShrink, DisagreeingOrMissingSurvivorsFailWithinTheTimeout) {
  auto out = runRanks(4, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    cfxConfig_t cfg = CFX_CONFIG_INITIALIZER;
    cfg.timeoutMs = 1000;
    cfxComm_t shrunk = nullptr;
    const auto t0 = Clock::now();
    if (rank == 3) {
      // Disagrees: it excludes rank 2 where the others exclude it, rank 3.
      const int two = 2;
      EXPECT_NE(cfxCommShrink(comm, &two, 1, &shrunk, &cfg), cfxSuccess);
    } else if (rank == 2) {
      // Never calls: sleeps past the others' rendezvous (two timeouts).
      std::this_thread::sleep_for(std::chrono::milliseconds(4000));
    } else {
      const int three = 3;  // ranks 0 and 1 wait for rank 2, which never comes
      const cfxResult_t r = cfxCommShrink(comm, &three, 1, &shrunk, &cfg);
      if (rank == 0) {  // the leader names the rank that never came
        EXPECT_EQ(r, cfxTimeout);
        EXPECT_TRUE(lastErrorMentions("rank(s) 2 never arrived"));
      } else {  // rank 1 times out too, or sees the leader give up first and close its store
        EXPECT_TRUE(r == cfxTimeout || r == cfxRemoteError) << cfxGetErrorString(r);
      }
      EXPECT_TRUE(lastErrorMentions("same excludeRanks")) << "the message says what to check";
    }
    const double ms = msSince(t0);
    EXPECT_EQ(shrunk, nullptr);
    if (rank != 2) {  // the rendezvous of a shrink waits two timeouts
      EXPECT_LT(ms, 2 * 1000.0 + 2500.0) << "rank " << rank << " waited " << ms << " ms";
    }
    // The parent is untouched by a shrink that failed.
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

TEST(CommShrink, BadArgumentsAreNamed) {
  auto out = runRanks(3, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    cfxComm_t shrunk = reinterpret_cast<cfxComm_t>(0x1);
    const int self[] = {rank};
    const int outside[] = {3};
    const int twice[] = {(rank + 1) % 3, (rank + 1) % 3};
    const int all[] = {0, 1, 2};
    EXPECT_EQ(cfxCommShrink(nullptr, nullptr, 0, &shrunk, nullptr), cfxInvalidArgument);
    EXPECT_EQ(shrunk, nullptr) << "newcomm is cleared on every failure";
    EXPECT_TRUE(lastErrorMentions("comm"));
    EXPECT_EQ(cfxCommShrink(comm, nullptr, 0, nullptr, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("newcomm"));
    EXPECT_EQ(cfxCommShrink(comm, nullptr, -1, &shrunk, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("excludeCount"));
    EXPECT_EQ(cfxCommShrink(comm, all, 3, &shrunk, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("excludeCount"));
    EXPECT_EQ(cfxCommShrink(comm, nullptr, 1, &shrunk, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("excludeRanks is NULL"));
    EXPECT_EQ(cfxCommShrink(comm, outside, 1, &shrunk, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("excludeRanks[0]: 3"));
    EXPECT_EQ(cfxCommShrink(comm, self, 1, &shrunk, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("calling rank"));
    EXPECT_EQ(cfxCommShrink(comm, twice, 2, &shrunk, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("listed twice"));
    cfxConfig_t bad = CFX_CONFIG_INITIALIZER;
    bad.splitShare = 3;
    EXPECT_EQ(cfxCommShrink(comm, nullptr, 0, &shrunk, &bad), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("splitShare"));
    EXPECT_EQ(cfxGroupStart(), cfxSuccess);
    EXPECT_EQ(cfxCommShrink(comm, nullptr, 0, &shrunk, nullptr), cfxInvalidUsage);
    EXPECT_TRUE(lastErrorMentions("group"));
    EXPECT_EQ(cfxGroupEnd(), cfxSuccess);
    // Nothing was exchanged: the communicator still works.
    expectShape(comm, {0, 1, 2}, rank);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

// The C++ API: conflux::Communicator::shrink after a killed rank, and the parent's error as an exception.
TEST(CommShrink, CppApi) {
  auto out = runRanks(3, [](int rank, int n, const cfxUniqueId& rawId) -> int {
    std::array<char, CFX_UNIQUE_ID_BYTES> bytes;
    std::memcpy(bytes.data(), rawId.internal, bytes.size());
    conflux::Communicator world(n, conflux::UniqueId::fromBytes(bytes), rank);
    if (rank == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      _exit(0);  // leaves without a word
    }
    std::vector<float> v(100000, 1.0f);
    EXPECT_THROW(for (int i = 0; i < 100000; ++i) world.allReduce(std::span<float>(v)), conflux::Exception);
    const std::vector<int> gone = {2};
    conflux::Communicator rest = world.shrink(gone);
    EXPECT_EQ(rest.size(), 2);
    EXPECT_EQ(rest.rank(), rank);
    std::vector<double> x(1000, rank + 1.0);
    rest.allReduce(std::span<double>(x));
    EXPECT_EQ(x.back(), 3.0);
    return 0;
  });
  EXPECT_TRUE(out[0].ok()) << out[0].describe();
  EXPECT_TRUE(out[1].ok()) << out[1].describe();
}

#if CONFLUX_TEST_OFI
// Across simulated nodes (ranks 0, 1 on node 0; 2, 3 on node 1) joined by each network: rank 3 is killed;
// ranks 0, 1, 2 shrink into a communicator that still spans both nodes. Over libfabric it sends through
// the parent's endpoints in a tag space of its own; over tcp it opens its own connections. The sweep
// passes either way, hierarchical plans included.
class ShrinkAcrossNodes : public ::testing::TestWithParam<const char*> {};

TEST_P(ShrinkAcrossNodes, SurvivorsOnBothNodesCarryOn) {
  const std::string net = GetParam();
  const InitLogs logs;
  RunOptions opts = killing(3, SIGKILL, logs.options().env);
  opts.env.emplace_back("CONFLUX_NET", net);
  opts.env.emplace_back("CONFLUX_TIMEOUT_MS", "4000");
  auto out = runRanks(4, [&](int rank, int n, const cfxUniqueId& id) -> int {
    simulateNode(rank / 2);
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    markInitialized();
    const int r = surviveAndShrink(comm, rank, 3, {0, 1, 2}, fullSweep({3, 40000}));
    if (net == "ofi") {
      EXPECT_EQ(linesContaining(logs.mine(), "(the split parent's endpoints) in tag space 1"), 1)
          << "the shrunk communicator shares the parent's endpoints";
    }
    EXPECT_EQ(linesContaining(logs.mine(), "shrinking 4 ranks to 3 (ranks 0,1,2)"), 1);
    return r;
  }, opts);
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(out[size_t(r)].ok()) << out[size_t(r)].describe();
  EXPECT_EQ(out[3].signal, SIGKILL);
}

INSTANTIATE_TEST_SUITE_P(Networks, ShrinkAcrossNodes, ::testing::Values("ofi", "tcp"));
#endif

}  // namespace
