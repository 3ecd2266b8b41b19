// The hierarchical algorithms under the plan simulator, on node layouts: N nodes x L ranks with ranks
// placed in blocks (node k holds k*L .. k*L+L-1) or round robin (rank r on node r % N), and uneven layouts
// (which fall back to the flat ring). Every datatype size, op, in and out of place, counts around the
// segment and block boundaries, small chunks (many pipelined segments) and unchunked.
#include <gtest/gtest.h>

#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/simulator.h"
#include "tests/unit/sim_sweep.h"

namespace conflux {
namespace {

std::shared_ptr<const NodeLayout> blockLayout(int nodes, int perNode) {
  std::vector<int> nodeOf;
  for (int r = 0; r < nodes * perNode; ++r) nodeOf.push_back(r / perNode);
  return std::make_shared<const NodeLayout>(NodeLayout::fromNodeOf(nodeOf));
}

std::shared_ptr<const NodeLayout> roundRobinLayout(int nodes, int perNode) {
  std::vector<int> nodeOf;
  for (int r = 0; r < nodes * perNode; ++r) nodeOf.push_back(r % nodes);
  return std::make_shared<const NodeLayout>(NodeLayout::fromNodeOf(nodeOf));
}

std::shared_ptr<const NodeLayout> fromNodeOf(std::vector<int> nodeOf) {
  return std::make_shared<const NodeLayout>(NodeLayout::fromNodeOf(nodeOf));
}

int runOne(const std::shared_ptr<const NodeLayout>& layout, int nranks, const std::string& what, Algo algo,
           Collective coll = Collective::AllReduce) {
  const uint64_t n = static_cast<uint64_t>(nranks);
  return runSimSweep({algo, coll, nranks, layout, 2, {0, 1, 7, n - 1, n + 1, 2 * n + 3, 1023, 4099}, what});
}

/// The hierarchical all-reduces: ring, recursive halving-doubling and double binary tree between nodes.
int runAll(const std::shared_ptr<const NodeLayout>& layout, int nranks, const std::string& what) {
  return runOne(layout, nranks, what, Algo::Hierarchical) + runOne(layout, nranks, what, Algo::HierarchicalRhd) +
         runOne(layout, nranks, what, Algo::HierarchicalDbtree);
}

TEST(HierSim, BlockLayouts) {
  int runs = 0;
  for (int nodes = 1; nodes <= 5; ++nodes) {
    for (int perNode = 1; perNode <= 5; ++perNode) {
      runs += runAll(blockLayout(nodes, perNode), nodes * perNode,
                     std::to_string(nodes) + "x" + std::to_string(perNode) + " blocks");
    }
  }
  EXPECT_GT(runs, 8000);
}

TEST(HierSim, RoundRobinLayouts) {
  for (int nodes = 2; nodes <= 4; ++nodes) {
    for (int perNode = 2; perNode <= 4; ++perNode) {
      runAll(roundRobinLayout(nodes, perNode), nodes * perNode,
             std::to_string(nodes) + "x" + std::to_string(perNode) + " round robin");
    }
  }
}

/// The hierarchical all-gather, reduce-scatter and broadcast (hierarchical_collectives.cc).
int runOthers(const std::shared_ptr<const NodeLayout>& layout, int nranks, const std::string& what) {
  int runs = 0;
  for (Collective c : {Collective::AllGather, Collective::ReduceScatter, Collective::Broadcast}) {
    runs += runOne(layout, nranks, what, Algo::Hierarchical, c);
  }
  return runs;
}

TEST(HierSim, OtherCollectivesOnBlockAndRoundRobinLayouts) {
  int runs = 0;
  for (auto [nodes, perNode] : {std::pair{1, 3}, {2, 1}, {2, 2}, {2, 3}, {3, 2}, {3, 3}, {4, 2}, {2, 4}, {5, 3}}) {
    runs += runOthers(blockLayout(nodes, perNode), nodes * perNode,
                      std::to_string(nodes) + "x" + std::to_string(perNode) + " blocks");
  }
  runs += runOthers(roundRobinLayout(3, 2), 6, "3x2 round robin");
  runs += runOthers(roundRobinLayout(2, 3), 6, "2x3 round robin");
  runs += runOthers(fromNodeOf({0, 0, 1}), 3, "uneven 2+1");
  EXPECT_GT(runs, 5000);
}

TEST(HierSim, LargerLayouts) {
  runAll(blockLayout(8, 2), 16, "8x2");
  runAll(blockLayout(2, 8), 16, "2x8");
  runAll(blockLayout(16, 1), 16, "16x1");
}

TEST(HierSim, UnevenLayoutsFallBackToTheRing) {
  // 2 + 1, 3 + 1 + 2, 1 + 4: no uniform hierarchy; the plan is the flat ring, still correct.
  for (const auto& nodeOf : {std::vector<int>{0, 0, 1}, std::vector<int>{0, 0, 0, 1, 2, 2},
                             std::vector<int>{0, 1, 1, 1, 1}, std::vector<int>{1, 0, 1}}) {
    auto layout = fromNodeOf(nodeOf);
    EXPECT_FALSE(layout->uniform());
    runAll(layout, static_cast<int>(nodeOf.size()), "uneven");
    PlanParams p;
    p.nranks = static_cast<int>(nodeOf.size());
    p.count = 100;
    p.layout = layout;
    EXPECT_EQ(buildPlan(Algo::Hierarchical, p).algorithm, "hier(ring)");
    EXPECT_EQ(buildPlan(Algo::HierarchicalRhd, p).algorithm, "hier_rhd(ring)");
    EXPECT_EQ(buildPlan(Algo::HierarchicalDbtree, p).algorithm, "hier_dbtree(ring)");
  }
  PlanParams p;  // no layout at all
  p.nranks = 3;
  p.count = 10;
  EXPECT_EQ(buildPlan(Algo::Hierarchical, p).algorithm, "hier(ring)");
}

TEST(HierSim, PlansTalkAcrossNodesOnlyBetweenEqualLocalIndices) {
  auto layout = blockLayout(3, 4);
  PlanParams p;
  p.nranks = 12;
  p.count = 1 << 16;
  p.chunkBytes = 4096;
  p.layout = layout;
  const Collective colls[] = {Collective::AllReduce, Collective::AllReduce, Collective::AllGather,
                              Collective::ReduceScatter, Collective::Broadcast};
  for (int r = 0; r < 60; ++r) {
    p.rank = r % 12;
    p.coll = colls[r / 12];
    p.root = 5;
    const Algo algo = r / 12 == 1 ? (p.rank % 2 ? Algo::HierarchicalRhd : Algo::HierarchicalDbtree) : Algo::Hierarchical;
    const Plan plan = buildPlan(algo, p);
    EXPECT_EQ(plan.algorithm, algoName(algo));
    for (const Op& op : plan.ops) {
      if (op.kind != OpKind::Send && op.kind != OpKind::Recv && op.kind != OpKind::RecvReduce) continue;
      EXPECT_NE(op.peer, p.rank);
      if (op.peer / 4 != p.rank / 4) {
        EXPECT_EQ(op.peer % 4, p.rank % 4) << algoName(algo) << " " << collectiveName(p.coll) << ": rank " << p.rank
                                           << " talks to " << op.peer;
      }
    }
  }
}

TEST(HierSim, NodeLayoutFromNodeKeys) {
  NodeLayout l = NodeLayout::fromNodeOf({7, 3, 7, 3, 9});
  ASSERT_EQ(l.nodes.size(), 3u);
  EXPECT_EQ(l.nodes[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(l.nodes[1], (std::vector<int>{1, 3}));
  EXPECT_EQ(l.nodes[2], (std::vector<int>{4}));
  EXPECT_FALSE(l.uniform());
  EXPECT_TRUE(NodeLayout::fromNodeOf({0, 1, 0, 1}).uniform());
  EXPECT_FALSE(NodeLayout{}.uniform());
}

}  // namespace
}  // namespace conflux
