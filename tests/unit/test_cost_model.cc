// The cost model (algorithms/cost_model.h) and the selector that uses it across nodes.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "algorithms/cost_model.h"
#include "algorithms/selector.h"
#include "core/error.h"

namespace conflux {
namespace {

// The namespaces of the benchmarks: 2 nodes, 2 ranks each, one 2 Gbit/s link per node.
CostParams rateLimitedLink(int nics = 1) {
  CostParams p;
  p.inter = {45e-6, 0.24e9};
  p.intra = {3e-6, 7e9};
  p.reduceRate = 20e9;
  p.nicsPerNode = nics;
  return p;
}

CostShape twoByTwo() { return CostShape{4, 2, 2, true}; }

double t(Algo a, uint64_t bytes, const CostShape& s, const CostParams& p) {
  return predictSeconds(a, Collective::AllReduce, bytes, s, p);
}

TEST(CostModel, HierarchicalWinsLargeMessagesAcrossNodes) {
  const CostParams p = rateLimitedLink();
  const uint64_t big = 64ull << 20;
  // One shared link: the ring crosses with 1.5 S per direction, hierarchical with S: about 1.5x.
  const double ratio = t(Algo::Ring, big, twoByTwo(), p) / t(Algo::Hierarchical, big, twoByTwo(), p);
  EXPECT_GT(ratio, 1.35);
  EXPECT_LT(ratio, 1.55);
  // One NIC per local rank: hierarchical moves S/2 per link, about 3x the ring.
  const CostParams rails = rateLimitedLink(2);
  const double railRatio = t(Algo::Ring, big, twoByTwo(), rails) / t(Algo::Hierarchical, big, twoByTwo(), rails);
  EXPECT_GT(railRatio, 2.7);
  EXPECT_LT(railRatio, 3.1);
}

TEST(CostModel, LatencyBoundSmallMessagesPreferFewSteps) {
  const CostParams p = rateLimitedLink();
  // 2(n-1) ring steps against 2 log2(n) for recursive halving/doubling.
  EXPECT_LT(t(Algo::RecHalvingDoubling, 8, twoByTwo(), p), t(Algo::Ring, 8, twoByTwo(), p));
  // 64 ranks on 8 nodes: 126 ring steps against log-depth trees (whose root crosses alone) and rhd (whose
  // 8 ranks per node queue on the one NIC).
  const CostShape wide{64, 8, 8, true};
  EXPECT_LT(t(Algo::BinomialTree, 8, wide, p), t(Algo::Ring, 8, wide, p) / 4);
  EXPECT_LT(t(Algo::RecHalvingDoubling, 8, wide, p), t(Algo::Ring, 8, wide, p) / 2);
  // On the 2 x 2 namespaces the tree's 4 rounds, one crossing each, beat rhd's 4 with both ranks crossing.
  EXPECT_LT(t(Algo::BinomialTree, 8, twoByTwo(), p), t(Algo::RecHalvingDoubling, 8, twoByTwo(), p));
}

TEST(CostModel, OnlyCostedCandidatesAreRanked) {
  const CostParams p = rateLimitedLink();
  for (Algo a : {Algo::OneShot, Algo::TwoShot, Algo::Direct}) EXPECT_LT(t(a, 1024, twoByTwo(), p), 0);
  EXPECT_LT(predictSeconds(Algo::Pairwise, Collective::AllReduce, 1024, twoByTwo(), p), 0);
  EXPECT_GT(predictSeconds(Algo::Pairwise, Collective::AllToAll, 1024, twoByTwo(), p), 0);
  // Hierarchical needs several nodes with equal rank counts.
  EXPECT_LT(t(Algo::Hierarchical, 1 << 20, CostShape{3, 2, 2, false}, p), 0);
  EXPECT_LT(t(Algo::Hierarchical, 1 << 20, CostShape{4, 1, 4, true}, p), 0);
  const auto ranked = rankAlgorithms(Collective::AllReduce, 64ull << 20, twoByTwo(), p);
  ASSERT_EQ(ranked.size(), 7u);  // ring, rhd, tree, dbtree, hier, hier_rhd, hier_dbtree
  EXPECT_EQ(ranked.front().algo, Algo::Hierarchical);
  for (size_t i = 1; i < ranked.size(); ++i) EXPECT_LE(ranked[i - 1].seconds, ranked[i].seconds);
  const std::string d = describeCandidates(ranked, 2);
  EXPECT_EQ(d.find("hier "), 0u) << d;
  EXPECT_NE(d.find(" ms < "), std::string::npos) << d;
}

TEST(CostModel, MoreTimeForMoreBytesAndSlowerLinks) {
  const CostParams p = rateLimitedLink();
  CostParams slow = p;
  slow.inter.bandwidth /= 2;
  for (Algo a : {Algo::Ring, Algo::RecHalvingDoubling, Algo::BinomialTree, Algo::DoubleBinaryTree, Algo::Hierarchical}) {
    EXPECT_LT(t(a, 1 << 20, twoByTwo(), p), t(a, 16 << 20, twoByTwo(), p)) << algoName(a);
    EXPECT_LT(t(a, 16 << 20, twoByTwo(), p), t(a, 16 << 20, twoByTwo(), slow)) << algoName(a);
  }
}

TEST(CostModel, CostFileParsesAndRejectsBadLines) {
  const std::string path = testing::TempDir() + "cost_model_test.txt";
  {
    std::ofstream f(path);
    f << "# measured on the cluster\ninter_alpha_us=12.5\ninter_gbytes_per_s=45  # 4 x 100G\n\n"
         "intra_gbytes_per_s=300\nintra_alpha_us=2\nreduce_gbytes_per_s=900\nnics_per_node=32\n";
  }
  CostParams p;
  loadCostFile(path, p);
  EXPECT_DOUBLE_EQ(p.inter.alpha, 12.5e-6);
  EXPECT_DOUBLE_EQ(p.inter.bandwidth, 45e9);
  EXPECT_DOUBLE_EQ(p.intra.bandwidth, 300e9);
  EXPECT_DOUBLE_EQ(p.intra.alpha, 2e-6);
  EXPECT_DOUBLE_EQ(p.reduceRate, 900e9);
  EXPECT_EQ(p.nicsPerNode, 32);
  EXPECT_EQ(p.source, path);
  for (const char* bad : {"inter_gbps=4\n", "inter_alpha_us=fast\n", "inter_alpha_us=-1\n", "just words\n",
                          "inter_alpha_us=3x\n"}) {
    {
      std::ofstream f(path);
      f << "intra_alpha_us=2\n" << bad;
    }
    CostParams q;
    try {
      loadCostFile(path, q);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(path + ":2"), std::string::npos) << e.what();
    }
  }
  std::remove(path.c_str());
  CostParams q;
  EXPECT_THROW(loadCostFile(path, q), Error);  // missing file
}

TEST(Selector, AcrossNodesTakesTheCheapestCandidateAndNamesThem) {
  Selector sel;
  CostParams p = rateLimitedLink();
  p.source = "test";
  sel.setCostParams(p);
  CommShape shape;
  shape.nranks = 4;
  shape.numNodes = 2;
  shape.allLocal = false;
  shape.ranksPerNode = 2;
  shape.maxRanksPerNode = 2;
  const Selection big = sel.select(Collective::AllReduce, 64ull << 20, shape);
  EXPECT_EQ(big.algo, Algo::Hierarchical);
  EXPECT_NE(big.reason.find("cost model (test): hier "), std::string::npos) << big.reason;
  EXPECT_NE(big.reason.find(" < ring "), std::string::npos) << big.reason;
  const Selection small = sel.select(Collective::AllReduce, 8, shape);
  EXPECT_EQ(small.algo, Algo::BinomialTree) << small.reason;
  // Uneven nodes (2 + 1): no hierarchical candidate, and a forced one falls back with the reason.
  shape.nranks = 3;
  shape.ranksPerNode = 0;
  EXPECT_NE(sel.select(Collective::AllReduce, 64ull << 20, shape).algo, Algo::Hierarchical);
  Selector forced("allreduce=hier");
  forced.setCostParams(p);
  const Selection f = forced.select(Collective::AllReduce, 64ull << 20, shape);
  EXPECT_NE(f.algo, Algo::Hierarchical);
  EXPECT_NE(f.reason.find("CONFLUX_ALGO=hier does not apply"), std::string::npos) << f.reason;
  // On one node the measured shared-memory rules stay in charge.
  CommShape local;
  local.nranks = 4;
  const Selection one = sel.select(Collective::AllReduce, 64ull << 20, local);
  EXPECT_EQ(one.algo, Algo::TwoShot);
}

}  // namespace
}  // namespace conflux
