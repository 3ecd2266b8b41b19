// The dataflow graph of a plan (algorithms/op_graph.h): which earlier operations each one waits for.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/op_graph.h"

namespace conflux {
namespace {

std::vector<uint32_t> depsOf(const OpGraph& g, uint32_t i) {
  return {g.deps.begin() + g.depStart[i], g.deps.begin() + g.depStart[i + 1]};
}

TEST(OpGraph, WaitsOnlyForOverlappingBytesWhenOneSideWrites) {
  PlanBuilder b("t");
  b.recv(1, BufRef::recv(0), 8);      // 0: writes recv[0, 8)
  b.send(2, BufRef::send(0), 8);      // 1: reads send[0, 8)
  b.nextRound();
  b.send(1, BufRef::recv(4), 8);      // 2: reads recv[4, 12): after 0 (read after write)
  b.send(2, BufRef::send(0), 8);      // 3: reads send[0, 8) again: reads do not wait for reads
  b.recv(2, BufRef::recv(16), 8);     // 4: writes recv[16, 24): touches nothing earlier
  b.nextRound();
  b.recv(1, BufRef::recv(8), 8);      // 5: writes recv[8, 16): after 2's read of recv[8, 12) (write after read)
  b.recv(2, BufRef::recv(20), 4);     // 6: writes recv[20, 24): after 4 (write after write)
  const Plan plan = b.finish();
  const OpGraph g = buildOpGraph(plan, 0, std::nullopt);
  EXPECT_TRUE(depsOf(g, 0).empty());
  EXPECT_TRUE(depsOf(g, 1).empty());
  EXPECT_EQ(depsOf(g, 2), (std::vector<uint32_t>{0}));
  EXPECT_TRUE(depsOf(g, 3).empty());
  EXPECT_TRUE(depsOf(g, 4).empty());
  EXPECT_EQ(depsOf(g, 5), (std::vector<uint32_t>{2}));
  EXPECT_EQ(depsOf(g, 6), (std::vector<uint32_t>{4}));
  EXPECT_EQ(g.sendExtent, 8u);
  EXPECT_EQ(g.recvExtent, 24u);
}

TEST(OpGraph, InPlaceTheSendBufferIsTheReceiveBuffer) {
  PlanBuilder b("t");
  b.send(1, BufRef::send(0), 8);    // 0: reads send[0, 8)
  b.nextRound();
  b.recv(1, BufRef::recv(16), 8);   // 1: writes recv[16, 24)
  const Plan plan = b.finish();
  // Apart: nothing in common. Send at recv + 16: 1 overwrites what 0 reads.
  EXPECT_TRUE(depsOf(buildOpGraph(plan, 0, std::nullopt), 1).empty());
  EXPECT_EQ(depsOf(buildOpGraph(plan, 0, 16), 1), (std::vector<uint32_t>{0}));
  EXPECT_TRUE(depsOf(buildOpGraph(plan, 0, 0), 1).empty());
  // sendInRecvOf: overlapping byte ranges alias, others do not.
  const OpGraph g = buildOpGraph(plan, 0, std::nullopt);
  std::vector<std::byte> mem(64);
  EXPECT_EQ(sendInRecvOf(g, mem.data() + 16, mem.data()), std::optional<int64_t>(16));
  EXPECT_EQ(sendInRecvOf(g, mem.data(), mem.data() + 4), std::optional<int64_t>(-4));
  EXPECT_EQ(sendInRecvOf(g, mem.data() + 40, mem.data()), std::nullopt);
  // Point-to-point batches (no buffers, absolute offsets) are one address space.
  EXPECT_EQ(sendInRecvOf(g, nullptr, nullptr), std::optional<int64_t>(0));
}

TEST(OpGraph, LocalOperationsFollowTheirRoundsMessagesWhereverListed) {
  PlanBuilder b("t");
  b.copy(BufRef::recv(0), BufRef::scratch(0), 8);  // 0: listed first, runs after 1
  b.recv(1, BufRef::scratch(0), 8);                // 1
  b.nextRound();
  b.finalize(BufRef::recv(0), 8);                  // 2: after 0
  const Plan plan = b.finish();
  const OpGraph g = buildOpGraph(plan, 0, std::nullopt);
  EXPECT_EQ(g.order, (std::vector<uint32_t>{1, 0, 2}));
  EXPECT_EQ(depsOf(g, 0), (std::vector<uint32_t>{1}));
  EXPECT_EQ(depsOf(g, 2), (std::vector<uint32_t>{0}));
  EXPECT_EQ(g.roundOf, (std::vector<uint32_t>{0, 0, 1}));
}

TEST(OpGraph, ABarrierIsAFenceAndChannelsKeepTheirOrder) {
  PlanBuilder b("t");
  b.send(1, BufRef::send(0), 8);     // 0
  b.recv(1, BufRef::recv(0), 8);     // 1
  b.send(2, BufRef::send(8), 8);     // 2
  b.nextRound();
  b.barrier();                       // 3
  b.nextRound();
  b.send(1, BufRef::send(64), 8);    // 4: the fence, and 0 before it on the channel to 1
  b.recv(1, BufRef::recv(64), 8);    // 5: after 1 on the channel from 1
  b.recvReduce(2, BufRef::recv(72), BufRef::send(72), 8);  // 6: the first message from 2
  const Plan plan = b.finish();
  const OpGraph g = buildOpGraph(plan, 0, std::nullopt);
  EXPECT_TRUE(depsOf(g, 3).empty());  // the executor starts a barrier once everything before it completed
  EXPECT_EQ(depsOf(g, 4), (std::vector<uint32_t>{3}));
  EXPECT_EQ(g.channelPrev[4], 0u);
  EXPECT_EQ(g.channelPrev[5], 1u);
  EXPECT_EQ(g.channelPrev[6], OpGraph::kNone);
  EXPECT_EQ(g.channelPrev[2], OpGraph::kNone);
  EXPECT_EQ(g.channelPrev[3], OpGraph::kNone);
}

TEST(OpGraph, AReferenceNamingThisRanksOwnBufferIsItsOwn) {
  PlanBuilder b("t");
  b.send(1, BufRef::peerSend(3, 0), 8);  // rank 3's view: its own send buffer
  b.nextRound();
  b.copy(BufRef::recv(0), BufRef::send(0), 8);
  b.nextRound();
  b.recv(1, BufRef::send(0), 8);  // (a write into the send buffer, only to see the dependency)
  const Plan plan = b.finish();
  EXPECT_EQ(depsOf(buildOpGraph(plan, 3, std::nullopt), 2), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(depsOf(buildOpGraph(plan, 2, std::nullopt), 2), (std::vector<uint32_t>{1}));
}

// Every dependency points backwards in program order, and two operations that touch the same bytes
// (one writing) in different rounds are ordered by a chain of dependencies: checked on real plans,
// including hierarchical ones whose segments overlap.
TEST(OpGraph, OrdersEveryConflictInRealPlans) {
  struct Case {
    Algo algo;
    int nodes, perNode;
    bool inPlace;
  };
  const Case cases[] = {{Algo::Ring, 1, 5, false}, {Algo::TwoShot, 1, 4, true}, {Algo::OneShot, 1, 3, false},  {Algo::RecHalvingDoubling, 1, 6, true},
                        {Algo::DoubleBinaryTree, 1, 7, false}, {Algo::Hierarchical, 3, 2, true},
                        {Algo::HierarchicalRhd, 4, 2, false}, {Algo::HierarchicalDbtree, 3, 3, true}};
  for (const Case& c : cases) {
    const int n = c.nodes * c.perNode;
    std::vector<int> nodeOf(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) nodeOf[static_cast<size_t>(r)] = r / c.perNode;
    PlanParams p;
    p.nranks = n;
    p.count = 4099;
    p.chunkBytes = 4096;
    p.stagingBytes = 4096;
    if (c.nodes > 1) p.layout = std::make_shared<const NodeLayout>(NodeLayout::fromNodeOf(nodeOf));
    for (int r = 0; r < n; ++r) {
      p.rank = r;
      const Plan plan = buildPlan(c.algo, p);
      const OpGraph g = buildOpGraph(plan, r, c.inPlace ? std::optional<int64_t>(0) : std::nullopt);
      const size_t ops = plan.ops.size();
      // reach[i]: the operations i waits for, directly or not (bitsets over program positions).
      std::vector<std::vector<bool>> reach(ops, std::vector<bool>(ops, false));
      for (uint32_t pos = 0; pos < ops; ++pos) {
        const uint32_t i = g.order[pos];
        if (plan.ops[i].kind == OpKind::Barrier) {  // a fence: after everything before it
          for (uint32_t q = 0; q < pos; ++q) reach[i][g.order[q]] = true;
        }
        for (uint32_t k = g.depStart[i]; k < g.depStart[i + 1]; ++k) {
          const uint32_t d = g.deps[k];
          ASSERT_LT(g.position[d], pos) << algoName(c.algo) << " rank " << r;
          reach[i][d] = true;
          for (size_t x = 0; x < ops; ++x) {
            if (reach[d][x]) reach[i][x] = true;
          }
        }
      }
      // Byte ranges each op writes and reads, in the receive buffer's terms when in place.
      struct Access {
        int kind;
        uint64_t lo, hi;
        bool write;
      };
      auto accesses = [&](uint32_t i) {
        const Op& op = plan.ops[i];
        std::vector<Access> out;
        auto add = [&](const BufRef& ref, bool write) {
          int kind = static_cast<int>(ref.kind);
          uint64_t lo = ref.offset;
          if (c.inPlace && ref.kind == BufKind::Send) kind = static_cast<int>(BufKind::Recv);
          out.push_back({kind, lo, lo + op.bytes, write});
        };
        if (op.kind != OpKind::Recv && op.kind != OpKind::Finalize) {
          for (uint32_t k = 0; k < op.nsrc; ++k) add(plan.src(op, k), false);
        }
        if (op.kind != OpKind::Send) add(op.dst, true);
        for (uint32_t k = 0; op.kind == OpKind::ReduceSpread && k < op.nextra; ++k) add(plan.extraDst(op, k), true);
        return out;
      };
      for (uint32_t a = 0; a < ops; ++a) {
        for (uint32_t b2 = a + 1; b2 < ops; ++b2) {
          const uint32_t i = g.order[a], j = g.order[b2];
          if (g.roundOf[i] == g.roundOf[j] && isCommOp(plan.ops[i].kind) && isCommOp(plan.ops[j].kind)) continue;
          bool conflict = false;
          for (const Access& x : accesses(i)) {
            for (const Access& y : accesses(j)) {
              if (x.kind == y.kind && (x.write || y.write) && x.lo < y.hi && y.lo < x.hi) conflict = true;
            }
          }
          if (conflict) {
            ASSERT_TRUE(reach[j][i]) << algoName(c.algo) << " rank " << r << ": op " << j << " (" << opKindName(plan.ops[j].kind)
                                     << ") does not wait for op " << i << " (" << opKindName(plan.ops[i].kind) << ")";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace conflux
