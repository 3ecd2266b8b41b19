// Failure behaviour: a killed or stuck rank becomes an error on every other rank, abort unblocks a
// waiting call, ranks that disagree on a root fail with a message naming it, nothing is left in /dev/shm.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/multiproc/harness.h"

using namespace conflux::testing;
using Clock = std::chrono::steady_clock;

namespace {

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

bool contains(const char* text, const std::string& what) { return std::string(text).find(what) != std::string::npos; }

/// How a loop of all-reduces ended.
struct Failure {
  cfxResult_t result = cfxSuccess;
  double detectMs = 0;      // from the last call that succeeded to the error
  const char* message = "";  // cfxGetLastError
};

/// All-reduces `count` floats in place until a call fails or `limitMs` passes, and prints how it ended.
Failure allReduceUntilError(int rank, cfxComm_t comm, size_t count, double limitMs) {
  std::vector<float> buf(count, 1.0f);
  const auto start = Clock::now();
  auto lastOk = Clock::now();
  Failure f;
  while (msSince(start) < limitMs) {
    f.result = cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr);
    if (f.result != cfxSuccess) break;
    lastOk = Clock::now();
  }
  f.detectMs = msSince(lastOk);
  f.message = cfxGetLastError(comm);
  fprintf(stderr, "rank %d: %s after %.0f ms: %s\n", rank, cfxGetErrorString(f.result), f.detectMs, f.message);
  return f;
}

// Counts per test: one that runs a plan (barriers, channels) and one small enough for the eager path.
class FailuresBySize : public ::testing::TestWithParam<size_t> {};

TEST_P(FailuresBySize, KilledRankBecomesAnErrorNamingItOnEverySurvivor) {
  const int n = 3;
  const size_t count = GetParam();
  auto before = shmFiles();
  RunOptions opts;
  opts.whileRunning = faultAfterInit(2, SIGKILL, 1000);
  auto out = runRanks(n, [count](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    markInitialized();
    const Failure f = allReduceUntilError(rank, comm, count, 20000);
    EXPECT_EQ(f.result, cfxRemoteError);
    EXPECT_TRUE(contains(f.message, "rank 2")) << f.message;
    EXPECT_LT(f.detectMs, 5000.0);
    cfxResult_t async = cfxSuccess;
    EXPECT_EQ(cfxCommGetAsyncError(comm, &async), cfxSuccess);
    EXPECT_EQ(async, cfxRemoteError);
    // Later calls fail fast instead of hanging.
    std::vector<float> buf(8, 1.0f);
    EXPECT_NE(cfxAllReduce(buf.data(), buf.data(), 8, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].exitCode, 0);
  EXPECT_EQ(out[1].exitCode, 0);
  EXPECT_EQ(out[2].signal, SIGKILL);
  // The killed rank's segment was unlinked at init: nothing new is left behind. Tests running in
  // parallel create segments of their own for a few milliseconds during init, so a new name must stay
  // for two seconds to count as a leak.
  auto leaked = [&] {
    std::vector<std::string> fresh;
    for (const auto& f : shmFiles()) {
      if (std::find(before.begin(), before.end(), f) == before.end()) fresh.push_back(f);
    }
    return fresh;
  };
  std::vector<std::string> left = leaked();
  for (int i = 0; i < 40 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    left = leaked();
  }
  for (const auto& f : left) ADD_FAILURE() << "leaked /dev/shm/" << f;
}

// Ranks pinned so that they outnumber their CPUs, the stuck rank alone on its own: an eager call's
// waiting ranks poll a while for a late peer that last ran on another CPU before yielding; at the most
// polls allowed, the wait still ends in time. (With one CPU allowed, all three share it.)
TEST_P(FailuresBySize, StuckRankTimesOutOnTheOthers) {
  RunOptions opts;
  opts.env = {{"CONFLUX_TIMEOUT_MS", "1000"}, {"CONFLUX_OVERSUBSCRIBED_REMOTE_SPIN_COUNT", "100000"}};
  const size_t count = GetParam();
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  auto out = runRanks(3, [count, &cpus](int rank, int nranks, const cfxUniqueId& id) -> int {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[rank == 1 && cpus.size() > 1 ? 1 : 0], &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return 4;
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    std::vector<float> buf(count, 1.0f);
    EXPECT_EQ(cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(4000));  // alive but stuck
    auto start = Clock::now();
    cfxResult_t r = cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr);
    double ms = msSince(start);
    fprintf(stderr, "rank %d: %s after %.0f ms: %s\n", rank, cfxGetErrorString(r), ms, cfxGetLastError(comm));
    EXPECT_NE(r, cfxSuccess);
    if (rank != 1) {
      EXPECT_LT(ms, 3500.0);
      EXPECT_TRUE(r == cfxTimeout || r == cfxRemoteError) << cfxGetErrorString(r);
      EXPECT_TRUE(contains(cfxGetLastError(comm), "for rank 1")) << cfxGetLastError(comm);
    }
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

INSTANTIATE_TEST_SUITE_P(Counts, FailuresBySize, ::testing::Values(size_t{1} << 20, size_t{2}),
                         [](const auto& p) { return p.param == 2 ? std::string("Eager") : std::string("Plan"); });

// A rank that takes the eager path and one that runs a plan for the "same" call (their counts differ)
// fail fast with the disagreement instead of waiting for the timeout.
TEST(Failures, EagerAndPlanRanksThatDisagreeFailFast) {
  auto out = runRanks(2, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    std::vector<float> buf(1 << 16, 1.0f);
    auto start = Clock::now();
    cfxResult_t r = cfxAllReduce(buf.data(), buf.data(), rank == 0 ? 2 : buf.size(), cfxFloat32, cfxSum, comm, nullptr);
    double ms = msSince(start);
    EXPECT_EQ(r, cfxInvalidUsage) << cfxGetErrorString(r) << ": " << cfxGetLastError(comm);
    EXPECT_TRUE(contains(cfxGetLastError(comm), "count")) << cfxGetLastError(comm);
    EXPECT_LT(ms, 5000.0);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

TEST(Failures, AbortUnblocksAWaitingCallAndPeersSeeIt) {
  auto out = runRanks(2, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    std::vector<float> buf(1 << 16, 1.0f);  // a plan: above the eager limit
    if (rank == 0) {
      std::thread aborter([comm] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        cfxCommAbort(comm);
      });
      auto start = Clock::now();
      cfxResult_t r = cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr);
      double ms = msSince(start);
      aborter.join();
      EXPECT_EQ(r, cfxAborted) << cfxGetLastError(comm);
      EXPECT_LT(ms, 2000.0);
    } else {
      // Never joins the call; learns about the abort through the async error.
      auto start = Clock::now();
      cfxResult_t async = cfxSuccess;
      while (async == cfxSuccess && msSince(start) < 5000) {
        cfxCommGetAsyncError(comm, &async);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      EXPECT_EQ(async, cfxAborted);
    }
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

TEST(Failures, MismatchedRootIsAnErrorNamingTheRoot) {
  auto out = runRanks(2, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    std::vector<int32_t> buf(100, rank);
    cfxResult_t r = cfxBroadcast(buf.data(), buf.data(), buf.size(), cfxInt32, /*root=*/rank, comm, nullptr);
    EXPECT_EQ(r, cfxInvalidUsage) << cfxGetErrorString(r);
    EXPECT_TRUE(contains(cfxGetLastError(comm), "root")) << cfxGetLastError(comm);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

// Across simulated nodes joined by each network transport (auto: ofi where libfabric is built, else tcp):
// a rank killed, stopped or aborted on node 1 becomes an error on every survivor, naming it, at once on
// node 0 too: node 1's first failure is announced to it.
class FailuresAcrossNodes : public ::testing::TestWithParam<const char*> {};

/// The stuck-rank tests' ranks on `comm` (4 ranks, two per node, rank 3 stopped by the parent, node 1 with
/// a 3 s timeout and node 0 with 30 s): rank 3 all-reduces until it is stopped and killed; the others
/// fail naming rank 3 within node 1's timeout plus its notice, node 0 through the notice.
void expectStoppedRankThreeAnnounced(int rank, cfxComm_t comm) {
  if (rank == 3) {
    std::vector<float> buf(size_t{1} << 18, 1.0f);
    for (;;) cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr);
  }
  const Failure f = allReduceUntilError(rank, comm, size_t{1} << 18, 40000);
  EXPECT_NE(f.result, cfxSuccess);
  EXPECT_TRUE(contains(f.message, "rank 3")) << f.message;
  EXPECT_LT(f.detectMs, 3000.0 + 3000.0);  // node 1's timeout and its notice, not node 0's 30 s
  if (rank < 2) {
    EXPECT_TRUE(contains(f.message, "reported")) << f.message;
  }
}

TEST_P(FailuresAcrossNodes, KilledRankOnAnotherNodeIsAnErrorOnEverySurvivor) {
  const std::string net = GetParam();
#if CONFLUX_TEST_OFI
  const bool seesResets = net == "tcp";
#else
  const bool seesResets = true;  // auto is tcp
#endif
  RunOptions opts;
  opts.env = {{"CONFLUX_NET", net}, {"CONFLUX_TIMEOUT_MS", "4000"}};
  opts.whileRunning = faultAfterInit(3, SIGKILL, 1000);
  auto out = runRanks(4, [seesResets](int rank, int nranks, const cfxUniqueId& id) -> int {
    simulateNode(rank / 2);
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    markInitialized();
    const Failure f = allReduceUntilError(rank, comm, size_t{1} << 18, 20000);
    EXPECT_NE(f.result, cfxSuccess);
    // Over tcp the other node sees its connections reset by its kernel, or hears from node 1, at once.
    // Over libfabric (tcp;ofi_rxm) a broken connection need not be reported, and when the kill finds no
    // rank of node 1 waiting for rank 3 (ranks wait on each other in a chain), nobody sees it die or
    // announces it: the call then times out, naming the operation that stalled on rank 3.
    EXPECT_TRUE(contains(f.message, "rank 3")) << f.message;
    EXPECT_LT(f.detectMs, seesResets ? 2000.0 : 4000.0 + 2000.0);
    std::vector<float> buf(8, 1.0f);
    EXPECT_NE(cfxAllReduce(buf.data(), buf.data(), 8, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  ASSERT_EQ(out.size(), 4u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[size_t(r)].exitCode, 0) << out[size_t(r)].describe();
  EXPECT_EQ(out[3].signal, SIGKILL);
}

// A rank that stops (SIGSTOP: its connections stay open, nothing resets) on node 1: its node's ranks
// time out after 3 s naming it, and the first of them tells node 0 (announceFailure), whose ranks, with
// a timeout of 30 s, fail at once with the same culprit instead of waiting out their own.
TEST_P(FailuresAcrossNodes, StuckRankIsAnnouncedToTheOtherNode) {
  RunOptions opts;
  // The hierarchical plan, whatever the cost probe measured: in it rank 2 waits for rank 3 through shared
  // memory, so node 1 is the first to time out and names rank 3 (in a flat tree it may wait for a rank of
  // node 0 instead, which waits for rank 3, and the first timeout names that rank).
  opts.env = {{"CONFLUX_NET", GetParam()}, {"CONFLUX_ALGO", "hier"}};
  opts.whileRunning = faultAfterInit(3, SIGSTOP, 1000, 9000);  // the survivors are done 9 s later
  auto out = runRanks(4, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    simulateNode(rank / 2);
    setenv("CONFLUX_TIMEOUT_MS", rank < 2 ? "30000" : "3000", 1);
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    markInitialized();
    expectStoppedRankThreeAnnounced(rank, comm);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  ASSERT_EQ(out.size(), 4u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[size_t(r)].exitCode, 0) << out[size_t(r)].describe();
}

// The same in a communicator split from the world, which shares the world's libfabric endpoints (its own
// tag space): node 1's notice, which names the child, reaches node 0's ranks in the child too. Before, only
// the world heard notices, and node 0 waited out its own 30 s. The child is made twice (the first is
// destroyed healthy): the notice is for the second, whatever the first left behind.
TEST_P(FailuresAcrossNodes, StuckRankIsAnnouncedInASplitCommunicator) {
  RunOptions opts;
  opts.env = {{"CONFLUX_NET", GetParam()}, {"CONFLUX_ALGO", "hier"}};
  opts.whileRunning = faultAfterInit(3, SIGSTOP, 1000, 9000);
  auto out = runRanks(4, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    simulateNode(rank / 2);
    setenv("CONFLUX_TIMEOUT_MS", rank < 2 ? "30000" : "3000", 1);
    cfxComm_t world, first, child;
    if (cfxCommInitRank(&world, nranks, id, rank) != cfxSuccess) return 2;
    if (cfxCommSplit(world, 0, rank, &first, nullptr) != cfxSuccess) return 2;
    std::vector<float> buf(size_t{1} << 18, 1.0f);
    if (cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, first, nullptr) != cfxSuccess) return 2;
    EXPECT_EQ(cfxCommDestroy(first), cfxSuccess);
    if (cfxCommSplit(world, 0, rank, &child, nullptr) != cfxSuccess) return 2;
    markInitialized();
    expectStoppedRankThreeAnnounced(rank, child);
    EXPECT_EQ(cfxCommDestroy(child), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(world), cfxSuccess);
    return 0;
  }, opts);
  ASSERT_EQ(out.size(), 4u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[size_t(r)].exitCode, 0) << out[size_t(r)].describe();
}

// abort() from another thread on node 1 while rank 3 never joins the call: rank 2's call ends Aborted and
// its first error (the abort, recorded by the other thread) goes to node 0, whose ranks (timeout 30 s)
// fail at once naming it instead of waiting for rank 2's connections to close or their own timeout.
TEST_P(FailuresAcrossNodes, AbortOnAnotherNodeIsAnnounced) {
  RunOptions opts;
  opts.env = {{"CONFLUX_NET", GetParam()}, {"CONFLUX_TIMEOUT_MS", "30000"}};
  auto out = runRanks(4, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    simulateNode(rank / 2);
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    std::vector<float> buf(size_t{1} << 16, 1.0f);
    if (rank == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(4000));  // never in the call the others wait in
    } else {
      std::thread aborter;
      if (rank == 2) {
        aborter = std::thread([comm] {
          std::this_thread::sleep_for(std::chrono::milliseconds(1000));
          cfxCommAbort(comm);
        });
      }
      const auto start = Clock::now();
      const cfxResult_t r = cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr);
      const double ms = msSince(start);
      const char* msg = cfxGetLastError(comm);
      fprintf(stderr, "rank %d: %s after %.0f ms: %s\n", rank, cfxGetErrorString(r), ms, msg);
      EXPECT_NE(r, cfxSuccess);
      EXPECT_TRUE(contains(msg, rank == 2 ? "aborted" : "rank 2 reported: rank 2 aborted")) << msg;
      EXPECT_LT(ms, 1000.0 + 3000.0);
      if (aborter.joinable()) aborter.join();
    }
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

INSTANTIATE_TEST_SUITE_P(Nets, FailuresAcrossNodes, ::testing::Values("auto", "tcp"),
                         [](const auto& p) { return std::string(p.param); });

}  // namespace
