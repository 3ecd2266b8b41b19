// Per-communicator settings (cfxCommInitRankConfig) and cfxCommSplit on real processes: the timeout and
// the name take effect, bad settings are named, split groups rank by key, NOCOLOR gets no communicator,
// children work (and split again) alongside their parent, also across simulated nodes, where they send
// through their parent's network endpoints.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/multiproc/harness.h"
#include "tests/multiproc/init_logs.h"

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

/// `calls` all-reduces on `comm` alternating 3 and 300000 floats, each rank adding its parent rank + 1;
/// true when every result is the sum `want`.
bool allReduces(cfxComm_t comm, int parentRank, float want, int calls) {
  bool ok = true;
  for (int i = 0; i < calls; ++i) {
    std::vector<float> v(i % 2 == 0 ? 3 : 300000, static_cast<float>(parentRank + 1));
    ok = ok && cfxAllReduce(v.data(), v.data(), v.size(), cfxFloat32, cfxSum, comm, nullptr) == cfxSuccess &&
         v.front() == want && v.back() == want;
  }
  return ok;
}

// A split whose groups mix ranks of two simulated nodes: the children talk over libfabric through their
// parent's endpoints (the log says which tag space each communicator sends in), also a grandchild; a
// child with splitShare = 0 opens its own. Parent and child then run all-reduces from two threads at
// once, large and small, on every rank.
#if CONFLUX_TEST_OFI
TEST(CommSplit, ChildrenShareTheParentsEndpointsAcrossNodes) {
  const InitLogs logs;
  auto out = runRanks(4, [&](int rank, int n, const cfxUniqueId& id) -> int {
    simulateNode(rank / 2);  // ranks 0,1 on node 0; 2,3 on node 1
    cfxComm_t world;
    if (cfxCommInitRank(&world, n, id, rank) != cfxSuccess) return 2;
    // Children {0, 2} and {1, 3}: each spans both nodes.
    cfxComm_t child = nullptr, own = nullptr, grand = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(cfxCommSplit(world, rank % 2, rank, &child, nullptr), cfxSuccess) << cfxGetLastError(world);
    const auto t1 = std::chrono::steady_clock::now();
    cfxConfig_t noShare = CFX_CONFIG_INITIALIZER;
    noShare.splitShare = 0;
    EXPECT_EQ(cfxCommSplit(world, rank % 2, rank, &own, &noShare), cfxSuccess) << cfxGetLastError(world);
    const auto t2 = std::chrono::steady_clock::now();
    if (rank == 0) {
      std::printf("split across two nodes: %.1f ms sharing the parent's endpoints, %.1f ms with its own\n",
                  std::chrono::duration<double, std::milli>(t1 - t0).count(),
                  std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
    if (child == nullptr || own == nullptr) return 1;
    EXPECT_EQ(cfxCommSplit(child, 0, -rank, &grand, nullptr), cfxSuccess) << cfxGetLastError(child);
    if (grand == nullptr) return 1;
    const int64_t pairSum = rank % 2 == 0 ? 0 + 2 : 1 + 3;
    checkChild(child, rank, pairSum, 2, rank / 2);
    checkChild(own, rank, pairSum, 2, rank / 2);
    checkChild(grand, rank, pairSum, 2, 1 - rank / 2);

    // The parent and a child that share endpoints, driven from two threads at once.
    bool worldOk = false;
    std::thread other([&] { worldOk = allReduces(world, rank, 1 + 2 + 3 + 4, 40); });
    const bool childOk = allReduces(child, rank, static_cast<float>(pairSum + 2), 40);
    other.join();
    EXPECT_TRUE(worldOk) << "rank " << rank << ": the parent's all-reduces beside its child's";
    EXPECT_TRUE(childOk) << "rank " << rank << ": the child's all-reduces beside its parent's";

    const std::string log = logs.mine();
    EXPECT_EQ(linesContaining(log, ") in tag space 0"), 2)
        << "the world and the splitShare = 0 child open endpoints (" << log << ")";
    EXPECT_EQ(linesContaining(log, "(the split parent's endpoints) in tag space 1"), 1) << "the child shares the world's";
    EXPECT_EQ(linesContaining(log, "(the split parent's endpoints) in tag space 2"), 1) << "the grandchild too";
    EXPECT_EQ(cfxCommDestroy(grand), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(own), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(child), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(world), cfxSuccess);
    return 0;
  }, logs.options());
  EXPECT_TRUE(allSucceeded(out));
}

// Many children alive at once, all sharing the world's endpoints (as PyTorch's groups and device meshes
// make them): what each child keeps posted for itself (its failure-notice receives) must not use up the
// receives a rank may post to a peer at once (CONFLUX_OFI_INFLIGHT, 8), or large messages stop moving.
// Each child, and the world after them, all-reduces large and small buffers correctly within the timeout.
TEST(CommSplit, ManyLiveChildrenSharingEndpointsStillCarryLargeMessages) {
  const InitLogs logs;
  RunOptions opts = logs.options();
  opts.env.emplace_back("CONFLUX_TIMEOUT_MS", "5000");
  auto out = runRanks(4, [&](int rank, int n, const cfxUniqueId& id) -> int {
    simulateNode(rank / 2);
    cfxComm_t world;
    if (cfxCommInitRank(&world, n, id, rank) != cfxSuccess) return 2;
    std::vector<cfxComm_t> children(12, nullptr);
    for (cfxComm_t& c : children) {
      EXPECT_EQ(cfxCommSplit(world, 0, rank, &c, nullptr), cfxSuccess) << cfxGetLastError(world);
      if (c == nullptr) return 1;
    }
    for (size_t i = 0; i < children.size(); ++i) {
      EXPECT_TRUE(allReduces(children[i], rank, 1 + 2 + 3 + 4, 4)) << "rank " << rank << ": child " << i << ": "
                                                                   << cfxGetLastError(children[i]);
    }
    EXPECT_TRUE(allReduces(world, rank, 1 + 2 + 3 + 4, 4)) << "rank " << rank << ": the world";
    EXPECT_EQ(linesContaining(logs.mine(), "(the split parent's endpoints) in tag space 12"), 1)
        << "the twelfth child shares the world's endpoints too";
    for (cfxComm_t c : children) EXPECT_EQ(cfxCommDestroy(c), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(world), cfxSuccess);
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

// CONFLUX_OFI_INFLIGHT=1: the failure notices' receive, posted to every peer for as long as the endpoints
// live, took the one receive a rank could post to a peer, so the cost probe's first message never
// arrived and every rank timed out at init. Receives get one more than the setting: init (with the probe)
// and large and small all-reduces across the nodes complete, for the world and a split child alike.
TEST(CommSplit, OneChunkInFlightStillMovesMessagesBesideTheStandingNoticeReceive) {
  RunOptions opts;
  opts.env = {{"CONFLUX_OFI_INFLIGHT", "1"}, {"CONFLUX_COST_PROBE", "1"}, {"CONFLUX_TIMEOUT_MS", "10000"}};
  auto out = runRanks(4, [&](int rank, int n, const cfxUniqueId& id) -> int {
    simulateNode(rank / 2);
    cfxComm_t world, child = nullptr;
    if (cfxCommInitRank(&world, n, id, rank) != cfxSuccess) return 2;
    EXPECT_TRUE(allReduces(world, rank, 1 + 2 + 3 + 4, 4)) << "rank " << rank << ": " << cfxGetLastError(world);
    EXPECT_EQ(cfxCommSplit(world, 0, rank, &child, nullptr), cfxSuccess) << cfxGetLastError(world);
    if (child == nullptr) return 1;
    EXPECT_TRUE(allReduces(child, rank, 1 + 2 + 3 + 4, 4)) << "rank " << rank << ": " << cfxGetLastError(child);
    EXPECT_EQ(cfxCommDestroy(child), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(world), cfxSuccess);
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

// A child whose call failed (rank 0 all-reduces alone and times out) leaves its tag space taken on the
// failed rank when it goes: the next child of the same ranks gets space 2, not the space whose receives
// may still be posted.
TEST(CommSplit, AFailedChildsTagSpaceIsNotReused) {
  const InitLogs logs;
  auto out = runRanks(2, [&](int rank, int n, const cfxUniqueId& id) -> int {
    simulateNode(rank);
    cfxComm_t world;
    if (cfxCommInitRank(&world, n, id, rank) != cfxSuccess) return 2;
    cfxConfig_t shortTimeout = CFX_CONFIG_INITIALIZER;
    shortTimeout.timeoutMs = 300;
    cfxComm_t first = nullptr, second = nullptr;
    EXPECT_EQ(cfxCommSplit(world, 0, rank, &first, &shortTimeout), cfxSuccess) << cfxGetLastError(world);
    if (first == nullptr) return 1;
    if (rank == 0) {
      std::vector<float> v(1000, 1.0f);
      EXPECT_EQ(cfxAllReduce(v.data(), v.data(), v.size(), cfxFloat32, cfxSum, first, nullptr), cfxTimeout);
    }
    EXPECT_EQ(cfxCommDestroy(first), cfxSuccess);
    EXPECT_EQ(cfxCommSplit(world, 0, rank, &second, nullptr), cfxSuccess) << cfxGetLastError(world);
    if (second == nullptr) return 1;
    checkChild(second, rank, 0 + 1, 2, rank);
    const std::string log = logs.mine();
    EXPECT_EQ(linesContaining(log, "(the split parent's endpoints) in tag space 1"), 1) << log;
    EXPECT_EQ(linesContaining(log, "(the split parent's endpoints) in tag space 2"), 1)
        << "the second child takes space 2: rank 0 keeps space 1 taken (" << log << ")";
    EXPECT_EQ(cfxCommDestroy(second), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(world), cfxSuccess);
    return 0;
  }, logs.options());
  EXPECT_TRUE(allSucceeded(out));
}

// cfxCommCreateGroup: only the members call it (here ranks 4, 1, 2 of five, in that order, over two
// simulated nodes); the group ranks by the list, sends through the parent's endpoints, and works beside
// the parent. Bad lists are refused, naming the argument, before anything is exchanged.
TEST(CommCreateGroup, MembersOnlyInListOrder) {
  const InitLogs logs;
  auto out = runRanks(5, [&](int rank, int n, const cfxUniqueId& id) -> int {
    simulateNode(rank < 3 ? 0 : 1);
    cfxComm_t world;
    if (cfxCommInitRank(&world, n, id, rank) != cfxSuccess) return 2;
    const std::vector<int> members = {4, 1, 2};
    const auto pos = std::find(members.begin(), members.end(), rank);
    if (pos != members.end()) {
      cfxComm_t bad = reinterpret_cast<cfxComm_t>(0x1);
      const int twice[] = {4, 1, 4}, outside[] = {4, 1, 5}, without[] = {0, 3};
      EXPECT_EQ(cfxCommCreateGroup(world, 3, twice, &bad, nullptr), cfxInvalidArgument);
      EXPECT_TRUE(lastErrorMentions("ranks[2]: rank 4 is listed twice"));
      EXPECT_EQ(bad, nullptr);
      EXPECT_EQ(cfxCommCreateGroup(world, 3, outside, &bad, nullptr), cfxInvalidArgument);
      EXPECT_TRUE(lastErrorMentions("ranks[2]"));
      EXPECT_EQ(cfxCommCreateGroup(world, 2, without, &bad, nullptr), cfxInvalidArgument);
      EXPECT_TRUE(lastErrorMentions("is not listed"));
      EXPECT_EQ(cfxCommCreateGroup(world, 0, members.data(), &bad, nullptr), cfxInvalidArgument);
      EXPECT_TRUE(lastErrorMentions("nranks"));
      EXPECT_EQ(cfxCommCreateGroup(world, 3, nullptr, &bad, nullptr), cfxInvalidArgument);
      EXPECT_TRUE(lastErrorMentions("ranks is NULL"));

      cfxComm_t group = nullptr;
      EXPECT_EQ(cfxCommCreateGroup(world, 3, members.data(), &group, nullptr), cfxSuccess) << cfxGetLastError(world);
      if (group == nullptr) return 1;
      checkChild(group, rank, 4 + 1 + 2, 3, static_cast<int>(pos - members.begin()));
      // The group and its parent at once, from two threads (ranks outside run only the parent's calls).
      bool worldOk = false;
      std::thread other([&] { worldOk = allReduces(world, rank, 1 + 2 + 3 + 4 + 5, 20); });
      const bool groupOk = allReduces(group, rank, 5 + 2 + 3, 20);
      other.join();
      EXPECT_TRUE(worldOk && groupOk) << "rank " << rank << ": world " << worldOk << ", group " << groupOk;
      const std::string log = logs.mine();
      EXPECT_EQ(linesContaining(log, "(the split parent's endpoints) in tag space 1"), 1) << log;
      EXPECT_EQ(cfxCommDestroy(group), cfxSuccess);
    } else {
      EXPECT_TRUE(allReduces(world, rank, 1 + 2 + 3 + 4 + 5, 20)) << "rank " << rank;
    }
    EXPECT_EQ(cfxCommDestroy(world), cfxSuccess);
    return 0;
  }, logs.options());
  EXPECT_TRUE(allSucceeded(out));
}
#endif

}  // namespace
