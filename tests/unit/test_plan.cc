// PlanBuilder, bufferSizes, the algorithm registry, and structural properties of the built plans
// (chunk bounds, staging bounds, barriers, round counts). Correctness is the simulator's job
// (test_simulator_sweep.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <string>

#include "algorithms/algorithms.h"
#include "algorithms/plan.h"
#include "core/error.h"

namespace conflux {
namespace {

PlanParams params(Collective coll, int n, int rank, uint64_t count, uint32_t elt = 4) {
  PlanParams p;
  p.coll = coll;
  p.nranks = n;
  p.rank = rank;
  p.count = count;
  p.eltSize = elt;
  p.stagingBytes = 1 << 16;
  return p;
}

int countOps(const Plan& plan, OpKind kind) {
  return static_cast<int>(std::count_if(plan.ops.begin(), plan.ops.end(), [&](const Op& o) { return o.kind == kind; }));
}

TEST(PlanBuilder, SkipsZeroByteOpsAndDropsEmptyRounds) {
  PlanBuilder b("t");
  b.send(1, BufRef::send(0), 0);
  b.recv(1, BufRef::recv(0), 0);
  b.recvReduce(1, BufRef::recv(0), BufRef::send(0), 0);
  b.copy(BufRef::recv(0), BufRef::send(0), 0);
  b.reduce(BufRef::recv(0), {BufRef::send(0)}, 0);
  b.finalize(BufRef::recv(0), 0);
  b.nextRound();
  b.nextRound();
  b.send(1, BufRef::send(8), 16);
  b.recvReduce(1, BufRef::recv(8), BufRef::send(8), 16);
  b.nextRound();
  b.barrier();
  b.reduce(BufRef::recv(0), {BufRef::staging(0, 0), BufRef::staging(1, 0)}, 8);
  const Plan plan = b.finish();
  EXPECT_EQ(plan.algorithm, "t");
  ASSERT_EQ(plan.rounds.size(), 2u);
  EXPECT_EQ(plan.rounds[0].firstOp, 0u);
  EXPECT_EQ(plan.rounds[0].numOps, 2u);
  EXPECT_EQ(plan.rounds[1].firstOp, 2u);
  EXPECT_EQ(plan.rounds[1].numOps, 2u);
  ASSERT_EQ(plan.ops.size(), 4u);
  EXPECT_EQ(plan.ops[0].kind, OpKind::Send);
  EXPECT_EQ(plan.src(plan.ops[0], 0).offset, 8u);
  EXPECT_EQ(plan.ops[1].kind, OpKind::RecvReduce);
  EXPECT_EQ(plan.ops[1].dst.kind, BufKind::Recv);
  EXPECT_EQ(plan.ops[2].kind, OpKind::Barrier);
  EXPECT_EQ(plan.ops[3].nsrc, 2u);
  EXPECT_EQ(plan.src(plan.ops[3], 1).rank, 1);
}

TEST(PlanBuilder, ScratchAndStagingTakeTheMaximum) {
  PlanBuilder b("t");
  b.needScratch(64);
  b.needScratch(16);
  b.needStaging(8);
  b.needStaging(32);
  const Plan plan = b.finish();
  EXPECT_EQ(plan.scratchBytes, 64u);
  EXPECT_EQ(plan.stagingBytes, 32u);
  EXPECT_TRUE(plan.rounds.empty());
}

TEST(PlanBufferSizes, PerCollective) {
  auto sizes = [](Collective c) { return bufferSizes(params(c, 4, 0, 10, 2)); };
  EXPECT_EQ(sizes(Collective::AllReduce).send, 20u);
  EXPECT_EQ(sizes(Collective::AllReduce).recv, 20u);
  EXPECT_EQ(sizes(Collective::Reduce).recv, 20u);
  EXPECT_EQ(sizes(Collective::Broadcast).send, 20u);
  EXPECT_EQ(sizes(Collective::AllGather).send, 20u);
  EXPECT_EQ(sizes(Collective::AllGather).recv, 80u);
  EXPECT_EQ(sizes(Collective::ReduceScatter).send, 80u);
  EXPECT_EQ(sizes(Collective::ReduceScatter).recv, 20u);
  EXPECT_EQ(sizes(Collective::AllToAll).send, 80u);
  EXPECT_EQ(sizes(Collective::AllToAll).recv, 80u);
}

TEST(AlgoRegistry, NamesRoundTrip) {
  const char* names[] = {"ring",     "rhd",    "tree", "dbtree",   "oneshot", "twoshot",     "pairwise",    "direct",
                         "hier",     "hier_rhd", "hier_dbtree", "eager", "ipc_oneshot", "ipc_twoshot", "ipc"};
  static_assert(std::size(names) == kNumAlgos);
  for (int i = 0; i < kNumAlgos; ++i) {
    const auto a = static_cast<Algo>(i);
    EXPECT_EQ(algoName(a), names[i]);
    ASSERT_TRUE(parseAlgo(names[i]).has_value());
    EXPECT_EQ(*parseAlgo(names[i]), a);
  }
  EXPECT_FALSE(parseAlgo("Ring").has_value());
  EXPECT_FALSE(parseAlgo("").has_value());
}

TEST(AlgoRegistry, SupportMatrix) {
  EXPECT_TRUE(algoSupports(Algo::Ring, Collective::AllReduce, 1));
  EXPECT_FALSE(algoSupports(Algo::Ring, Collective::AllReduce, 0));
  EXPECT_FALSE(algoSupports(Algo::Ring, Collective::AllToAll, 4));
  EXPECT_TRUE(algoSupports(Algo::Pairwise, Collective::AllToAll, 4));
  EXPECT_TRUE(algoSupports(Algo::OneShot, Collective::AllToAll, 4));
  EXPECT_FALSE(algoSupports(Algo::RecHalvingDoubling, Collective::Broadcast, 4));
  EXPECT_TRUE(algoSupports(Algo::DoubleBinaryTree, Collective::Reduce, 3));
  for (int c = 0; c < kNumCollectives; ++c) {
    for (Algo a : algosFor(static_cast<Collective>(c))) {
      EXPECT_TRUE(algoSupports(a, static_cast<Collective>(c), 5));
    }
  }
  EXPECT_TRUE(algosFor(Collective::SendRecv).empty());
  EXPECT_EQ(algosFor(Collective::AllReduce).size(), 10u);  // hier, hier_rhd and hier_dbtree included
  for (Algo a : algosFor(Collective::AllReduce)) EXPECT_EQ(algoEngine(a), Engine::Plan) << algoName(a);
  EXPECT_TRUE(strategiesFor(Collective::SendRecv).empty());
  EXPECT_TRUE(algoSupports(Algo::Direct, Collective::AllToAll, 4));
  EXPECT_FALSE(algoSupports(Algo::Direct, Collective::SendRecv, 4));
  EXPECT_TRUE(algoUsesPeerBuffers(Algo::Direct));
  EXPECT_FALSE(algoUsesPeerBuffers(Algo::TwoShot));
  EXPECT_FALSE(algoUsesStaging(Algo::Direct));
  EXPECT_TRUE(algoUsesStaging(Algo::OneShot));
  EXPECT_TRUE(algoUsesStaging(Algo::TwoShot));
  EXPECT_FALSE(algoUsesStaging(Algo::Ring));
}

TEST(AlgoRegistry, BuildPlanRejectsUnsupportedAndInvalid) {
  auto expectInvalid = [](Algo a, const PlanParams& p, const std::string& needle) {
    try {
      buildPlan(a, p);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expectInvalid(Algo::Pairwise, params(Collective::AllReduce, 4, 0, 8), "pairwise");
  expectInvalid(Algo::Pairwise, params(Collective::AllReduce, 4, 0, 8), "allreduce");
  expectInvalid(Algo::Ring, params(Collective::AllToAll, 4, 0, 8), "alltoall");
  expectInvalid(Algo::Ring, params(Collective::AllReduce, 4, 4, 8), "rank 4 out of range");
  expectInvalid(Algo::Ring, params(Collective::AllReduce, 0, 0, 8), "nranks");
  PlanParams p = params(Collective::Broadcast, 4, 0, 8);
  p.root = -1;
  expectInvalid(Algo::BinomialTree, p, "root -1");
  p = params(Collective::ReduceScatter, 4, 0, 8);
  p.stagingBytes = 8;  // needs two halves of n elements
  expectInvalid(Algo::OneShot, p, "stagingBytes 8 too small");
  expectInvalid(Algo::Eager, params(Collective::AllReduce, 4, 0, 8), "'eager' runs allreduce without a plan");
  expectInvalid(Algo::IpcTwoShot, params(Collective::AllReduce, 4, 0, 8), "ipc_twoshot");
}

TEST(AlgoPlans, NameAndZeroCount) {
  for (int c = 0; c < kNumCollectives; ++c) {
    for (Algo a : algosFor(static_cast<Collective>(c))) {
      for (int n : {1, 2, 5}) {
        const Plan plan = buildPlan(a, params(static_cast<Collective>(c), n, n - 1, 0));
        // Without a node layout the hierarchical algorithm is the flat ring, and says so.
        const bool hier = a == Algo::Hierarchical || a == Algo::HierarchicalRhd || a == Algo::HierarchicalDbtree;
        EXPECT_EQ(plan.algorithm, hier ? std::string(algoName(a)) + "(ring)" : std::string(algoName(a)));
        EXPECT_TRUE(plan.ops.empty()) << algoName(a) << " " << collectiveName(static_cast<Collective>(c));
        EXPECT_EQ(plan.stagingBytes, 0u);
      }
    }
  }
}

TEST(AlgoPlans, MessagesRespectChunkBytes) {
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (Algo a : algosFor(coll)) {
      if (algoUsesStaging(a)) continue;
      for (int n : {2, 3, 7, 8}) {
        for (int r = 0; r < n; ++r) {
          PlanParams p = params(coll, n, r, 1000, 4);
          p.chunkBytes = 64;
          p.root = n / 2;
          const Plan plan = buildPlan(a, p);
          for (const Op& op : plan.ops) {
            if (isCommOp(op.kind) && op.kind != OpKind::Barrier) {
              EXPECT_LE(op.bytes, 64u) << algoName(a) << " " << collectiveName(coll);
            }
          }
        }
      }
    }
  }
}

TEST(AlgoPlans, StagingPlansStayInBoundsAndSynchronise) {
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (Algo a : {Algo::OneShot, Algo::TwoShot}) {
      if (!algoSupports(a, coll, 4)) continue;
      PlanParams p = params(coll, 4, 1, 1000, 4);
      p.stagingBytes = 4 * 4 * 2 * 5;  // five elements per block per half: many chunks
      const Plan plan = buildPlan(a, p);
      EXPECT_GT(plan.stagingBytes, 0u);
      EXPECT_LE(plan.stagingBytes, p.stagingBytes);
      EXPECT_GT(countOps(plan, OpKind::Barrier), 1);
      EXPECT_EQ(countOps(plan, OpKind::Send) + countOps(plan, OpKind::Recv), 0);
    }
  }
}

TEST(AlgoPlans, OneShotUsesOneBarrierPerChunk) {
  PlanParams p = params(Collective::AllReduce, 4, 2, 100, 4);
  p.stagingBytes = 2 * 40;  // 10 elements per half -> 10 chunks
  EXPECT_EQ(countOps(buildPlan(Algo::OneShot, p), OpKind::Barrier), 10);
  EXPECT_EQ(countOps(buildPlan(Algo::TwoShot, p), OpKind::Barrier), 20);
}

TEST(AlgoPlans, RoundCounts) {
  // Ring all-reduce: n-1 reduce-scatter rounds and n-1 all-gather rounds (plus Finalize).
  const Plan ring = buildPlan(Algo::Ring, params(Collective::AllReduce, 8, 3, 800));
  EXPECT_EQ(countOps(ring, OpKind::Send), 14);
  EXPECT_EQ(countOps(ring, OpKind::Finalize), 1);
  // Pairwise: n-1 exchange rounds, the own block copied in the first.
  const Plan pw = buildPlan(Algo::Pairwise, params(Collective::AllToAll, 6, 1, 10));
  EXPECT_EQ(pw.rounds.size(), 5u);
  EXPECT_EQ(countOps(pw, OpKind::Copy), 1);
  // Rabenseifner on a power of two: log2(n) halving + log2(n) doubling exchanges.
  const Plan rhd = buildPlan(Algo::RecHalvingDoubling, params(Collective::AllReduce, 8, 5, 800));
  EXPECT_EQ(countOps(rhd, OpKind::Send), 6);
}

TEST(AlgoPlans, DoubleBinaryTreeSpreadsTheLoad) {
  // Each rank is an inner node of at most one tree, so no rank sends much more than twice the
  // message (a single binary tree's inner nodes send three times it).
  for (int n : {3, 4, 7, 8, 13, 16, 31}) {
    uint64_t most = 0;
    for (int r = 0; r < n; ++r) {
      const Plan plan = buildPlan(Algo::DoubleBinaryTree, params(Collective::AllReduce, n, r, 1000, 4));
      uint64_t sent = 0;
      for (const Op& op : plan.ops) sent += op.kind == OpKind::Send ? op.bytes : 0;
      most = std::max(most, sent);
    }
    EXPECT_LE(most, 2u * 4000u) << "n=" << n;
  }
}

}  // namespace
}  // namespace conflux
