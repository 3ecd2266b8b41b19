// Recursive halving-doubling of a larger radix (PlanParams::radix, rec_halving_doubling.cc): the mixed
// radix it picks, and its plans under the simulator, flat (rhd: all-reduce, reduce-scatter, all-gather)
// and between nodes (hier_rhd), for rank counts that factor into the radix, that factor into smaller
// radices, and that fold (primes above the radix); every element size, in and out of place, counts
// around the block boundaries, unchunked and in small chunks (several rounds per step: the two sets of
// scratch slots).
#include <gtest/gtest.h>

#include <functional>
#include <iterator>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/schedule.h"
#include "algorithms/simulator.h"
#include "tests/unit/sim_sweep.h"

namespace conflux {
namespace {

int product(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 1, std::multiplies<>()); }

TEST(RadixSchedule, RadixTwoIsTheClassicPowerOfTwo) {
  for (int n = 1; n <= 100; ++n) {
    const sched::RadixSchedule s = sched::radixSchedule(n, 2);
    EXPECT_EQ(s.P, sched::largestPowerOfTwo(n)) << n;
    EXPECT_EQ(product(s.radices), s.P) << n;
    for (int r : s.radices) EXPECT_EQ(r, 2) << n;
  }
}

TEST(RadixSchedule, FewestRoundsWithinTheRadix) {
  // 1024 = 4^5; 6 = 3 x 2 (no fold); 7 folds to 4 (one step and two folds beat 6's two steps and two
  // folds); 12 = 4 x 3; 9 with radix 8 is 3 x 3 (no fold: 4 rounds) rather than 8 with a fold (2 + 2
  // rounds, a tie that the larger P wins); 16 with radix 3 stays 2^4 (9 would fold 7 ranks).
  EXPECT_EQ(sched::radixSchedule(1024, 4).radices, (std::vector<int>{4, 4, 4, 4, 4}));
  EXPECT_EQ(sched::radixSchedule(6, 4).radices, (std::vector<int>{3, 2}));
  EXPECT_EQ(sched::radixSchedule(7, 4).P, 4);
  EXPECT_EQ(sched::radixSchedule(12, 4).radices, (std::vector<int>{4, 3}));
  EXPECT_EQ(sched::radixSchedule(9, 8).radices, (std::vector<int>{3, 3}));
  EXPECT_EQ(sched::radixSchedule(1024, 8).radices.size(), 4u);  // 8 x 8 x 4 x 4
  EXPECT_EQ(sched::radixSchedule(16, 3).radices, (std::vector<int>{2, 2, 2, 2}));
  for (int k : {3, 4, 5, 8, 16}) {
    for (int n = 1; n <= 300; ++n) {
      const sched::RadixSchedule s = sched::radixSchedule(n, k);
      ASSERT_EQ(product(s.radices), s.P) << n << " radix " << k;
      EXPECT_LE(s.P, n);
      EXPECT_GE(s.P, sched::largestPowerOfTwo(n)) << "never more folded ranks than radix 2: " << n << " radix " << k;
      for (int r : s.radices) {
        EXPECT_GE(r, 2);
        EXPECT_LE(r, k);
      }
      // Never more rounds than radix 2 takes.
      const sched::RadixSchedule two = sched::radixSchedule(n, 2);
      const auto rounds = [n](const sched::RadixSchedule& x) { return 2 * x.radices.size() + (x.P < n ? 2 : 0); };
      EXPECT_LE(rounds(s), rounds(two)) << n << " radix " << k;
    }
  }
}

/// `algo` for `coll` on `nranks` ranks (over `layout` when given) at radix `radix`, with a count of 1023
/// too when `large`; the number of runs.
int runRadix(Algo algo, Collective coll, int nranks, int radix, const std::shared_ptr<const NodeLayout>& layout,
             bool large = true) {
  const uint64_t n = static_cast<uint64_t>(nranks);
  std::vector<uint64_t> counts = {0, 1, 7, n - 1, n + 1, 2 * n + 3};
  if (large) counts.push_back(1023);
  return runSimSweep({algo, coll, nranks, layout, radix, counts, "radix " + std::to_string(radix)});
}

TEST(RadixSim, FlatRhdEveryCollective) {
  int runs = 0;
  // Each radix on rank counts that factor into it, into smaller radices, and that fold.
  const std::pair<int, std::vector<int>> cases[] = {{3, {3, 5, 6, 9}}, {4, {2, 4, 7, 12, 17}}, {8, {9, 17}}};
  for (const auto& [radix, ranks] : cases) {
    for (int n : ranks) {
      for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather}) {
        runs += runRadix(Algo::RecHalvingDoubling, c, n, radix, nullptr);
      }
    }
  }
  // The upper end: one step of 15 or 19 peers (radix 16 on 16 ranks, 64 on 20 ranks), small counts.
  for (auto [radix, n] : {std::pair{16, 16}, {64, 20}}) {
    for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather}) {
      runs += runRadix(Algo::RecHalvingDoubling, c, n, radix, nullptr, false);
    }
  }
  RecordProperty("configs", runs);
}

std::shared_ptr<const NodeLayout> blockLayout(int nodes, int perNode) {
  std::vector<int> nodeOf;
  for (int r = 0; r < nodes * perNode; ++r) nodeOf.push_back(r / perNode);
  return std::make_shared<const NodeLayout>(NodeLayout::fromNodeOf(nodeOf));
}

TEST(RadixSim, HierRhdBetweenNodes) {
  int runs = 0;
  for (int radix : {3, 4}) {
    for (int nodes : {3, 4, 6, 9}) {
      for (int perNode : {1, 2}) {
        runs += runRadix(Algo::HierarchicalRhd, Collective::AllReduce, nodes * perNode, radix,
                         blockLayout(nodes, perNode));
      }
    }
  }
  RecordProperty("configs", runs);
}

// A step of radix k talks to k - 1 peers in one round: 16 ranks take 2 rounds each way at radix 4
// (against 4 at radix 2), and no round exchanges with more than 3 peers.
TEST(RadixSim, FewerRoundsMorePeersPerRound) {
  PlanParams p;
  p.coll = Collective::AllReduce;
  p.nranks = 16;
  p.rank = 5;
  p.count = 1600;
  p.eltSize = 4;
  p.chunkBytes = 0;
  const Plan two = buildPlan(Algo::RecHalvingDoubling, p);
  p.radix = 4;
  const Plan four = buildPlan(Algo::RecHalvingDoubling, p);
  const auto commRounds = [](const Plan& plan) {
    int rounds = 0;
    size_t peersMost = 0;
    for (const Round& r : plan.rounds) {
      std::vector<int> peers;
      for (uint32_t i = 0; i < r.numOps; ++i) {
        const Op& op = plan.ops[r.firstOp + i];
        if (op.kind == OpKind::Send) peers.push_back(op.peer);
      }
      rounds += peers.empty() ? 0 : 1;
      peersMost = std::max(peersMost, peers.size());
    }
    return std::make_pair(rounds, peersMost);
  };
  EXPECT_EQ(commRounds(two), std::make_pair(8, size_t{1}));
  EXPECT_EQ(commRounds(four), std::make_pair(4, size_t{3}));
}

}  // namespace
}  // namespace conflux
