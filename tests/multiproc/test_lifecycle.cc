// Communicators come and go without leaving anything behind: after several made and destroyed one after
// another (on one node, and across two simulated nodes over each network), every rank's file
// descriptors and threads are back where they were before the first.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/process_resources.h"
#include "tests/multiproc/harness.h"

using namespace conflux::testing;

namespace {

/// Ids for `cycles` communicators, made by rank 0 (its process hosts their stores) and published here.
struct Ids {
  std::atomic<int> made{0};
  cfxUniqueId ids[8];
};

void cycle(const std::string& net, int nodes) {
  auto* ids = static_cast<Ids*>(mmap(nullptr, sizeof(Ids), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(ids, MAP_FAILED);
  new (ids) Ids();
  RunOptions opts;
  if (!net.empty()) opts.env = {{"CONFLUX_NET", net}};
  auto out = runRanks(4, [&](int rank, int n, const cfxUniqueId&) -> int {
    if (nodes > 1) simulateNode(rank * nodes / n);
    const int fds = openDescriptors(), threads = liveThreads();
    for (int c = 0; c < 4; ++c) {
      if (rank == 0) {
        EXPECT_EQ(cfxGetUniqueId(&ids->ids[c]), cfxSuccess);
        ids->made.store(c + 1);
      }
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (ids->made.load() <= c && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (ids->made.load() <= c) return 3;  // rank 0 failed to make the id
      cfxComm_t comm;
      if (cfxCommInitRank(&comm, n, ids->ids[c], rank) != cfxSuccess) return 2;
      std::vector<float> v(70000, 1.0f);
      EXPECT_EQ(cfxAllReduce(v.data(), v.data(), v.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
      EXPECT_EQ(v.back(), float(n));
      EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    }
    EXPECT_EQ(liveThreadsSettled(threads), threads) << "rank " << rank << ": threads after 4 communicators";
    EXPECT_EQ(openDescriptors(), fds) << "rank " << rank << ": descriptors after 4 communicators";
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
  munmap(ids, sizeof(Ids));
}

TEST(Lifecycle, OneNodeLeavesNothing) { cycle("", 1); }

#if CONFLUX_TEST_OFI
// Each communicator's libfabric endpoint closes (it was kept open for its failure-notice receives,
// about ten descriptors a communicator).
TEST(Lifecycle, TwoNodesOverLibfabricLeaveNothing) { cycle("ofi", 2); }
#endif

TEST(Lifecycle, TwoNodesOverTcpLeaveNothing) { cycle("tcp", 2); }

}  // namespace
