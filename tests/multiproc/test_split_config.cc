// Per-communicator settings (cfxCommInitRankConfig) and cfxCommSplit on real processes: the timeout and
// the name take effect, bad settings are named, split groups rank by key, NOCOLOR gets no communicator,
// children work (and split again) alongside their parent, also across simulated nodes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/multiproc/harness.h"

using namespace conflux::testing;

namespace {

TEST(CommConfig, BadSettingsAreNamed) {
  auto out = runRanks(1, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm = nullptr;
    cfxConfig_t raw{};
    EXPECT_EQ(cfxCommInitRankConfig(&comm, n, id, rank, &raw), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("CFX_CONFIG_INITIALIZER"));
    EXPECT_EQ(comm, nullptr);
    cfxConfig_t cfg = CFX_CONFIG_INITIALIZER;
    cfg.timeoutMs = 0;
    EXPECT_EQ(cfxCommInitRankConfig(&comm, n, id, rank, &cfg), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("timeoutMs"));
    cfg = CFX_CONFIG_INITIALIZER;
    cfg.commName = "model-parallel";
    if (cfxCommInitRankConfig(&comm, n, id, rank, &cfg) != cfxSuccess) return 2;
    // The name appears in the messages of the communicator's calls.
    float x = 1.0f;
    EXPECT_EQ(cfxAllReduce(&x, &x, 1, cfxFloat32, static_cast<cfxRedOp_t>(-3), comm, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("[comm model-parallel]"));
    cfxComm_t child = nullptr;
    cfg.splitShare = 7;
    EXPECT_EQ(cfxCommSplit(comm, 0, 0, &child, &cfg), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("splitShare"));
    EXPECT_EQ(cfxCommSplit(comm, -5, 0, &child, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("color"));
    EXPECT_EQ(cfxCommSplit(comm, 0, 0, nullptr, nullptr), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("newcomm"));
    EXPECT_EQ(cfxGroupStart(), cfxSuccess);
    EXPECT_EQ(cfxCommSplit(comm, 0, 0, &child, nullptr), cfxInvalidUsage);
    EXPECT_TRUE(lastErrorMentions("group"));
    EXPECT_EQ(cfxGroupEnd(), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

// A communicator with a 400 ms timeout fails a call that a peer never makes within about that time,
// while the environment says 60 s.
TEST(CommConfig, TimeoutTakesEffect) {
  RunOptions opts;
  opts.env = {{"CONFLUX_TIMEOUT_MS", "60000"}};
  auto out = runRanks(2, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxConfig_t cfg = CFX_CONFIG_INITIALIZER;
    cfg.timeoutMs = 400;
    cfg.commName = "short";
    cfxComm_t comm;
    if (cfxCommInitRankConfig(&comm, n, id, rank, &cfg) != cfxSuccess) return 2;
    std::vector<float> v(1 << 16, 1.0f);
    if (rank == 1) {
      sleep(3);  // never joins the call; exits after rank 0 gave up
      cfxCommDestroy(comm);
      return 0;
    }
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(cfxAllReduce(v.data(), v.data(), v.size(), cfxFloat32, cfxSum, comm, nullptr), cfxTimeout);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(lastErrorMentions("400"));
    EXPECT_TRUE(lastErrorMentions("[comm short]"));
    EXPECT_LT(s, 2.5) << "the 400 ms timeout took " << s << " s";
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

/// Sum over the child of the parent ranks: checks the child connects exactly its members.
int checkChild(cfxComm_t child, int parentRank, int64_t wantSum, int wantSize, int wantRank) {
  int size = 0, rank = -1;
  EXPECT_EQ(cfxCommCount(child, &size), cfxSuccess);
  EXPECT_EQ(cfxCommUserRank(child, &rank), cfxSuccess);
  EXPECT_EQ(size, wantSize);
  EXPECT_EQ(rank, wantRank);
  std::vector<int64_t> v(10000, parentRank);
  EXPECT_EQ(cfxAllReduce(v.data(), v.data(), v.size(), cfxInt64, cfxSum, child, nullptr), cfxSuccess)
      << cfxGetLastError(child);
  EXPECT_EQ(v.front(), wantSum);
  EXPECT_EQ(v.back(), wantSum);
  return 0;
}

// 7 ranks: colors by rank % 3 (rank 6 passes NOCOLOR), keys reversing the order; each child works, then
// splits again into halves; the parent keeps working throughout.
TEST(CommSplit, ColorsKeysAndNocolor) {
  auto out = runRanks(7, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t world;
    if (cfxCommInitRank(&world, n, id, rank) != cfxSuccess) return 2;
    const int color = rank == 6 ? CFX_SPLIT_NOCOLOR : rank % 3;
    cfxConfig_t cfg = CFX_CONFIG_INITIALIZER;
    cfg.commName = "third";
    cfxComm_t child = reinterpret_cast<cfxComm_t>(0x1);
    EXPECT_EQ(cfxCommSplit(world, color, -rank, &child, &cfg), cfxSuccess) << cfxGetLastError(world);
    if (color == CFX_SPLIT_NOCOLOR) {
      EXPECT_EQ(child, nullptr);
    } else {
      // Members of color c: c, c + 3 (and 6 would be, but passed NOCOLOR); keys -rank: reversed order.
      std::vector<int> members;
      for (int r = color; r < 6; r += 3) members.push_back(r);
      const int size = static_cast<int>(members.size());
      int64_t sum = 0;
      for (int r : members) sum += r;
      int pos = 0;
      while (members[pos] != rank) ++pos;
      checkChild(child, rank, sum, size, size - 1 - pos);
    }
    // The parent still works (the children exist beside it).
    std::vector<float> w(1000, 1.0f);
    EXPECT_EQ(cfxAllReduce(w.data(), w.data(), w.size(), cfxFloat32, cfxSum, world, nullptr), cfxSuccess);
    EXPECT_EQ(w[999], 7.0f);
    if (child != nullptr) {
      // Split the child again: everyone alone (color = rank in the child).
      int crank = 0;
      cfxCommUserRank(child, &crank);
      cfxComm_t grand = nullptr;
      EXPECT_EQ(cfxCommSplit(child, crank, 0, &grand, nullptr), cfxSuccess) << cfxGetLastError(child);
      if (grand != nullptr) {
        checkChild(grand, rank, rank, 1, 0);
        EXPECT_EQ(cfxCommDestroy(grand), cfxSuccess);
      } else {
        ADD_FAILURE() << "no grandchild communicator";
      }
      EXPECT_EQ(cfxCommDestroy(child), cfxSuccess);
    }
    EXPECT_EQ(cfxCommDestroy(world), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

// A split whose groups mix ranks of two simulated nodes: the children talk over libfabric.
#if CONFLUX_TEST_OFI
TEST(CommSplit, AcrossSimulatedNodes) {
  auto out = runRanks(4, [](int rank, int n, const cfxUniqueId& id) -> int {
    simulateNode(rank / 2);  // ranks 0,1 on node 0; 2,3 on node 1
    cfxComm_t world;
    if (cfxCommInitRank(&world, n, id, rank) != cfxSuccess) return 2;
    cfxComm_t child = nullptr;
    EXPECT_EQ(cfxCommSplit(world, rank % 2, rank, &child, nullptr), cfxSuccess) << cfxGetLastError(world);
    if (child == nullptr) return 1;
    checkChild(child, rank, rank % 2 == 0 ? 0 + 2 : 1 + 3, 2, rank / 2);
    EXPECT_EQ(cfxCommDestroy(child), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(world), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}
#endif

}  // namespace
