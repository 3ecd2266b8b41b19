// The dataflow graph of a plan (algorithms/op_graph.h): which earlier operations each one waits for.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/op_graph.h"
#include "core/error.h"

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
// (one writing) in different rounds are ordered by a chain of dependencies (a Barrier orders everything
// before it): checked on the real plans of every plan algorithm for every collective it runs, on one node
// and across nodes, in place (with the send buffer where the collective puts it) and out of place.
TEST(OpGraph, OrdersEveryConflictInRealPlans) {
  struct Shape {
    int nodes, perNode;
  };
  const Shape shapes[] = {{1, 3}, {1, 4}, {3, 2}, {2, 3}};
  const Collective colls[] = {Collective::AllReduce, Collective::Reduce, Collective::Broadcast,
                              Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll};
  const Algo algos[] = {Algo::Ring, Algo::RecHalvingDoubling, Algo::BinomialTree, Algo::DoubleBinaryTree,
                        Algo::OneShot, Algo::TwoShot, Algo::Pairwise, Algo::Direct, Algo::Hierarchical,
                        Algo::HierarchicalRhd, Algo::HierarchicalDbtree};
  int plansChecked = 0;
  for (const Shape& sh : shapes) {
    const int n = sh.nodes * sh.perNode;
    std::vector<int> nodeOf(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) nodeOf[static_cast<size_t>(r)] = r / sh.perNode;
    for (Collective coll : colls) {
      for (Algo algo : algos) {
        if (!algoSupports(algo, coll, n)) continue;
        for (bool inPlace : {false, true}) {
          PlanParams p;
          p.coll = coll;
          p.nranks = n;
          p.count = 1031;
          p.root = n - 1;
          p.chunkBytes = 1024;
          p.stagingBytes = 2048;
          if (sh.nodes > 1) p.layout = std::make_shared<const NodeLayout>(NodeLayout::fromNodeOf(nodeOf));
          for (int r = 0; r < n; ++r) {
            p.rank = r;
            Plan plan;
            try {
              plan = buildPlan(algo, p);
            } catch (const Error&) {
              break;  // not for this shape (a hierarchical plan on one node, say)
            }
            // Where the collective puts the send buffer in the receive buffer in place.
            const int64_t block = static_cast<int64_t>(p.count) * p.eltSize;
            int64_t at = 0;
            if (coll == Collective::AllGather) at = r * block;
            if (coll == Collective::ReduceScatter) at = -r * block;
            const std::optional<int64_t> sendInRecv = inPlace ? std::optional<int64_t>(at) : std::nullopt;
            const OpGraph g = buildOpGraph(plan, r, sendInRecv);
            const size_t ops = plan.ops.size();
            std::vector<uint32_t> position(ops);  // by op: its place in program order
            for (uint32_t q = 0; q < ops; ++q) position[g.order[q]] = q;
            // reach[i]: the operations i waits for, directly or not.
            std::vector<std::vector<bool>> reach(ops, std::vector<bool>(ops, false));
            for (uint32_t pos = 0; pos < ops; ++pos) {
              const uint32_t i = g.order[pos];
              if (plan.ops[i].kind == OpKind::Barrier) {  // a fence: after everything before it
                for (uint32_t q = 0; q < pos; ++q) reach[i][g.order[q]] = true;
              }
              for (uint32_t k = g.depStart[i]; k < g.depStart[i + 1]; ++k) {
                const uint32_t d = g.deps[k];
                ASSERT_LT(position[d], pos) << algoName(algo) << " rank " << r;
                reach[i][d] = true;
                for (size_t x = 0; x < ops; ++x) {
                  if (reach[d][x]) reach[i][x] = true;
                }
              }
            }
            // Byte ranges each op reads and writes: a buffer (kind, owner) and a range, the send buffer
            // in the receive buffer's terms in place.
            struct Access {
              int kind, owner;
              int64_t lo, hi;
              bool write;
            };
            auto accesses = [&](uint32_t i) {
              const Op& op = plan.ops[i];
              std::vector<Access> out;
              auto add = [&](const BufRef& ref, bool write) {
                const int owner = ref.rank == r ? -1 : ref.rank;
                int kind = static_cast<int>(ref.kind);
                auto lo = static_cast<int64_t>(ref.offset);
                if (inPlace && ref.kind == BufKind::Send && owner == -1) {
                  kind = static_cast<int>(BufKind::Recv);
                  lo += at;
                }
                out.push_back({kind, owner, lo, lo + static_cast<int64_t>(op.bytes), write});
              };
              if (op.kind == OpKind::Barrier) return out;
              if (op.kind != OpKind::Recv && op.kind != OpKind::Finalize) {
                for (uint32_t k = 0; k < op.nsrc; ++k) add(plan.src(op, k), false);
              }
              if (op.kind != OpKind::Send) add(op.dst, true);
              for (uint32_t k = 0; op.kind == OpKind::ReduceSpread && k < op.nextra; ++k) add(plan.extraDst(op, k), true);
              return out;
            };
            for (uint32_t a = 0; a < ops; ++a) {
              const uint32_t i = g.order[a];
              const std::vector<Access> ai = accesses(i);
              for (uint32_t b2 = a + 1; b2 < ops; ++b2) {
                const uint32_t j = g.order[b2];
                if (g.roundOf[i] == g.roundOf[j] && isCommOp(plan.ops[i].kind) && isCommOp(plan.ops[j].kind)) continue;
                bool conflict = false;
                for (const Access& x : ai) {
                  for (const Access& y : accesses(j)) {
                    conflict |= x.kind == y.kind && x.owner == y.owner && (x.write || y.write) && x.lo < y.hi && y.lo < x.hi;
                  }
                }
                if (conflict) {
                  ASSERT_TRUE(reach[j][i]) << algoName(algo) << " " << collectiveName(coll) << (inPlace ? " in place" : "")
                                           << " rank " << r << ": op " << j << " (" << opKindName(plan.ops[j].kind)
                                           << ") does not wait for op " << i << " (" << opKindName(plan.ops[i].kind) << ")";
                }
              }
            }
            ++plansChecked;
          }
        }
      }
    }
  }
  EXPECT_GE(plansChecked, 400);
}

}  // namespace
}  // namespace conflux
