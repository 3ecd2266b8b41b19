// The libfabric endpoints' closing handshake (transport/ofi/notice_board.h): a rank that destroys its last
// communicator across nodes first tells the ranks on other nodes goodbye and keeps its endpoints open until
// each of them said goodbye too (each does once its own last call is over), for at most
// CONFLUX_OFI_CLOSE_WAIT_MS; a communicator whose call failed does not wait. Without it, a rank that
// finished first could close while a peer had its last message still to read, and libfabric's `net`
// provider then lost that message.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/multiproc/harness.h"
#include "tests/multiproc/init_logs.h"

using namespace conflux::testing;

namespace {

#if CONFLUX_TEST_OFI

using Clock = std::chrono::steady_clock;

int64_t msSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

/// One all-reduce across the two simulated nodes; true when every element is the rank count.
bool allReduceOnce(cfxComm_t comm, int n) {
  std::vector<float> v(1000, 1.0f);
  if (cfxAllReduce(v.data(), v.data(), v.size(), cfxFloat32, cfxSum, comm, nullptr) != cfxSuccess) return false;
  return v.front() == float(n) && v.back() == float(n);
}

/// When each rank's destroy started and ended (steady clock, ns: one clock for every process of the
/// machine), in memory the forked ranks share.
struct Destroys {
  std::atomic<int64_t> start[2];
  std::atomic<int64_t> end[2];
};

int64_t nowNs() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

/// Each rank of two simulated nodes all-reduces once, rank 1 then sleeps `rank1DelayMs`, and each destroys
/// its communicator: how long the destroy took (ms), or -1 when init failed. Records the destroy's start
/// and end in `times` when given.
int64_t destroyMs(int rank, int n, const cfxUniqueId& id, int rank1DelayMs, Destroys* times = nullptr) {
  simulateNode(rank);
  cfxComm_t comm;
  if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return -1;
  EXPECT_TRUE(allReduceOnce(comm, n)) << cfxGetLastError(comm);
  if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(rank1DelayMs));
  const auto start = Clock::now();
  if (times != nullptr) times->start[rank].store(nowNs());
  EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
  if (times != nullptr) times->end[rank].store(nowNs());
  return msSince(start);
}

// Rank 1 closes 600 ms after rank 0: rank 0's destroy lasts until rank 1 has started its own (and said
// goodbye), and not the whole wait (5 s here, so that a loaded machine's slow teardown is not taken for it).
TEST(ClosingHandshake, TheFirstRankToCloseWaitsForTheOtherNodesGoodbye) {
  auto* times = static_cast<Destroys*>(mmap(nullptr, sizeof(Destroys), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(times, MAP_FAILED);
  new (times) Destroys();
  RunOptions opts;
  opts.env = {{"CONFLUX_OFI_CLOSE_WAIT_MS", "5000"}};
  auto out = runRanks(2, [&](int rank, int n, const cfxUniqueId& id) -> int {
    const int64_t ms = destroyMs(rank, n, id, 600, times);
    if (ms < 0) return 2;
    if (rank == 0) EXPECT_LT(ms, 4000) << "rank 0 waited out CONFLUX_OFI_CLOSE_WAIT_MS although rank 1 said goodbye";
    else EXPECT_LT(ms, 2500) << "rank 0's goodbye had arrived long before rank 1 closed";
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
  EXPECT_GT(times->end[0].load(), times->start[1].load()) << "rank 0 closed before rank 1 began to close";
  munmap(times, sizeof(Destroys));
}

// A peer that does not close in time: the wait ends after CONFLUX_OFI_CLOSE_WAIT_MS, with a warning that
// names it; and 0 turns the handshake off.
TEST(ClosingHandshake, TheWaitIsBoundedAndNamesTheSilentRank) {
  const InitLogs logs;
  for (const char* wait : {"300", "0"}) {
    RunOptions opts = logs.options();
    for (auto& [name, value] : opts.env) {
      if (name == "CONFLUX_DEBUG_SUBSYS") value = "INIT,NET";  // the warning is the network's
    }
    opts.env.push_back({"CONFLUX_OFI_CLOSE_WAIT_MS", wait});
    auto out = runRanks(2, [&](int rank, int n, const cfxUniqueId& id) -> int {
      const int64_t ms = destroyMs(rank, n, id, 1500);
      if (ms < 0) return 2;
      if (rank == 0) {
        const bool off = std::string(wait) == "0";
        const int warned = linesContaining(logs.mine(), "without a goodbye from rank(s) 1 within CONFLUX_OFI_CLOSE_WAIT_MS");
        if (off) {
          EXPECT_LT(ms, 1000) << "the handshake is off, yet rank 0 waited for rank 1, 1.5 s later";
          EXPECT_EQ(warned, 0);
        } else {
          EXPECT_GE(ms, 250) << "rank 0 did not wait for rank 1's goodbye";
          EXPECT_LT(ms, 1200) << "rank 0 waited past CONFLUX_OFI_CLOSE_WAIT_MS=300";
          EXPECT_EQ(warned, 1) << "the warning names rank 1";
        }
      }
      return 0;
    }, opts);
    EXPECT_TRUE(allSucceeded(out)) << "CONFLUX_OFI_CLOSE_WAIT_MS=" << wait;
  }
}

// A communicator whose call failed does not wait for goodbyes (its peers may be dead): rank 0 all-reduces
// alone, times out, and closes at once although rank 1 closes 3 s later; rank 1, healthy, does not wait
// out the 5 s for rank 0, whose goodbye came before (saying that rank 0 does not wait).
TEST(ClosingHandshake, AFailedCommunicatorDoesNotWait) {
  RunOptions opts;
  opts.env = {{"CONFLUX_OFI_CLOSE_WAIT_MS", "5000"}};
  auto out = runRanks(2, [&](int rank, int n, const cfxUniqueId& id) -> int {
    simulateNode(rank);
    cfxConfig_t config = CFX_CONFIG_INITIALIZER;
    config.timeoutMs = 300;
    cfxComm_t comm;
    if (cfxCommInitRankConfig(&comm, n, id, rank, &config) != cfxSuccess) return 2;
    if (rank == 0) {
      std::vector<float> v(1000, 1.0f);
      EXPECT_EQ(cfxAllReduce(v.data(), v.data(), v.size(), cfxFloat32, cfxSum, comm, nullptr), cfxTimeout);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));
    }
    const auto start = Clock::now();
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    EXPECT_LT(msSince(start), 1500) << "rank " << rank << " waited at close (for the peer 3 s later, or the 5 s wait)";
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

#endif  // CONFLUX_TEST_OFI

}  // namespace
