// The simulator must catch broken plans: each test hand-builds a plan with one specific bug and
// checks that the simulator reports it (and a few hand-made correct plans that it must accept).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "algorithms/simulator.h"

namespace conflux {
namespace {

using Body = std::function<void(PlanBuilder&, const PlanParams&)>;

SimConfig config(Collective coll, int n, uint64_t count, RedOp op = RedOp::Sum, uint32_t elt = 4) {
  SimConfig cfg;
  cfg.params.coll = coll;
  cfg.params.nranks = n;
  cfg.params.count = count;
  cfg.params.eltSize = elt;
  cfg.params.stagingBytes = 1024;
  cfg.op = op;
  cfg.calls = 3;
  return cfg;
}

SimResult run(const SimConfig& cfg, const Body& body) {
  return simulate(cfg, [&](const PlanParams& p) {
    PlanBuilder b("handmade");
    body(b, p);
    return b.finish();
  });
}

void expectError(const SimResult& r, const std::string& needle) {
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find(needle), std::string::npos) << "error was: " << r.error;
}

/// A correct 2-rank all-reduce: exchange whole vectors, reduce, finalize.
void exchangeAllReduce(PlanBuilder& b, const PlanParams& p, int finalizes) {
  const uint64_t bytes = p.count * p.eltSize;
  b.send(1 - p.rank, BufRef::send(0), bytes);
  b.recvReduce(1 - p.rank, BufRef::recv(0), BufRef::send(0), bytes);
  for (int i = 0; i < finalizes; ++i) {
    b.nextRound();
    b.finalize(BufRef::recv(0), bytes);
  }
}

TEST(SimNegative, AcceptsCorrectHandMadePlan) {
  const SimResult r = run(config(Collective::AllReduce, 2, 5, RedOp::Avg),
                          [](PlanBuilder& b, const PlanParams& p) { exchangeAllReduce(b, p, 1); });
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.messages, 2u * 3u);
}

TEST(SimNegative, Deadlock) {
  // Both ranks receive before they send: with rendezvous semantics nobody can progress.
  const SimResult r = run(config(Collective::AllReduce, 2, 4), [](PlanBuilder& b, const PlanParams& p) {
    b.recv(1 - p.rank, BufRef::recv(0), 16);
    b.nextRound();
    b.send(1 - p.rank, BufRef::send(0), 16);
  });
  expectError(r, "deadlock");
  expectError(r, "rank 0 (call 0, round 0) waits on op 0 (Recv from rank 1, 16 bytes)");
}

TEST(SimNegative, MessageInABarriersRound) {
  // The executor runs a Barrier as a fence, after everything before it: rank 0's receive listed first
  // would wait for rank 1's send, which waits behind rank 1's barrier, which waits for rank 0.
  const SimResult r = run(config(Collective::AllReduce, 2, 4), [](PlanBuilder& b, const PlanParams& p) {
    if (p.rank == 0) b.recv(1, BufRef::recv(0), 16);
    b.barrier();
    if (p.rank == 1) b.send(0, BufRef::send(0), 16);
  });
  expectError(r, "a message in a round with a Barrier");
}

TEST(SimNegative, OwnInputPastTheScaledSources) {
  // A one-shot reduce-scatter on 66 ranks that reduces its own piece from send as the last source: the
  // executor would not scale it for PreMulSum (its mask has 64 bits), so the plan is refused, whatever
  // the op. With the own piece first the same plan is accepted.
  constexpr int kRanks = 66;
  for (bool ownFirst : {false, true}) {
    SimConfig cfg = config(Collective::ReduceScatter, kRanks, 1, RedOp::PreMulSum);
    cfg.params.stagingBytes = 2 * kRanks * 4;
    cfg.calls = 1;
    const SimResult r = run(cfg, [&](PlanBuilder& b, const PlanParams& p) {
      b.needStaging(kRanks * 4);
      for (int q = 0; q < kRanks; ++q) {
        if (q != p.rank) b.copy(BufRef::staging(-1, q * 4), BufRef::send(q * 4), 4);
      }
      b.nextRound();
      b.barrier();
      std::vector<BufRef> srcs;
      for (int q = 0; q < kRanks; ++q) {
        if (q != p.rank) srcs.push_back(BufRef::staging(q, p.rank * 4));
      }
      srcs.insert(ownFirst ? srcs.begin() : srcs.end(), BufRef::send(p.rank * 4));
      b.reduce(BufRef::recv(0), srcs, 4);
      b.nextRound();
      b.finalize(BufRef::recv(0), 4);
      b.nextRound();
      b.barrier();
    });
    if (ownFirst) {
      EXPECT_TRUE(r.ok) << r.error;
    } else {
      expectError(r, "reduces this rank's own input as source 65");
    }
  }
}

TEST(SimNegative, SizeMismatch) {
  const SimResult r = run(config(Collective::AllReduce, 2, 2), [](PlanBuilder& b, const PlanParams& p) {
    if (p.rank == 0) b.send(1, BufRef::send(0), 8);
    else b.recv(0, BufRef::recv(0), 4);
  });
  expectError(r, "size mismatch");
  expectError(r, "sends 8 bytes to rank 1");
  expectError(r, "expects 4 bytes");
}

TEST(SimNegative, StagingReadWithoutBarrier) {
  // Each rank stages its block and reads the peer's in the next round: no Barrier orders the peer's
  // write before the read.
  const SimResult r = run(config(Collective::AllGather, 2, 1), [](PlanBuilder& b, const PlanParams& p) {
    b.needStaging(4);
    b.copy(BufRef::staging(-1, 0), BufRef::send(0), 4);
    b.nextRound();
    b.copy(BufRef::recv(4 * (1 - p.rank)), BufRef::staging(1 - p.rank, 0), 4);
    b.copy(BufRef::recv(4 * p.rank), BufRef::send(0), 4);
    b.nextRound();
    b.barrier();
  });
  expectError(r, "staging race");
}

TEST(SimNegative, StagingOverwriteWhilePeerReads) {
  // Correctly ordered write -> Barrier -> read, but the owner then rewrites the bytes without another
  // Barrier, while the peer may still be reading them.
  const SimResult r = run(config(Collective::AllGather, 2, 1), [](PlanBuilder& b, const PlanParams& p) {
    b.needStaging(4);
    b.copy(BufRef::staging(-1, 0), BufRef::send(0), 4);
    b.nextRound();
    b.barrier();
    b.copy(BufRef::recv(4 * (1 - p.rank)), BufRef::staging(1 - p.rank, 0), 4);
    b.copy(BufRef::recv(4 * p.rank), BufRef::send(0), 4);
    b.nextRound();
    b.copy(BufRef::staging(-1, 0), BufRef::send(0), 4);
  });
  expectError(r, "staging race");
}

TEST(SimNegative, StagingReuseAcrossCallsIsSafe) {
  // Write, Barrier, read: correct within a call, and across calls thanks to the two staging areas.
  const SimResult r = run(config(Collective::AllGather, 2, 3), [](PlanBuilder& b, const PlanParams& p) {
    b.needStaging(12);
    b.copy(BufRef::staging(-1, 0), BufRef::send(0), 12);
    b.nextRound();
    b.barrier();
    b.copy(BufRef::recv(12 * (1 - p.rank)), BufRef::staging(1 - p.rank, 0), 12);
    b.copy(BufRef::recv(12 * p.rank), BufRef::send(0), 12);
  });
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.barriers, 3u);
}

TEST(SimNegative, StagingPlanWithoutBarrier) {
  const SimResult r = run(config(Collective::AllReduce, 1, 1), [](PlanBuilder& b, const PlanParams&) {
    b.needStaging(4);
    b.copy(BufRef::staging(-1, 0), BufRef::send(0), 4);
    b.nextRound();
    b.copy(BufRef::recv(0), BufRef::staging(-1, 0), 4);
  });
  expectError(r, "uses staging but has no Barrier");
}

TEST(SimNegative, IntraRoundConflict) {
  // Finalize rewrites what the Copy of the same round writes: rule 3.
  const SimResult r = run(config(Collective::AllReduce, 1, 4), [](PlanBuilder& b, const PlanParams&) {
    b.copy(BufRef::recv(0), BufRef::send(0), 16);
    b.finalize(BufRef::recv(8), 8);
  });
  expectError(r, "conflict within a round");
  expectError(r, "recv [8, 16)");
}

TEST(SimNegative, IntraRoundConflictOnlyInPlace) {
  // Sending send[0, 8) while receiving into recv[0, 8) is fine out of place, a conflict in place.
  const Body body = [](PlanBuilder& b, const PlanParams& p) {
    b.send(1 - p.rank, BufRef::send(0), 8);
    b.recvReduce(1 - p.rank, BufRef::recv(0), BufRef::send(0), 8);
    b.nextRound();
    b.finalize(BufRef::recv(0), 8);
  };
  SimConfig cfg = config(Collective::AllReduce, 2, 2);
  EXPECT_TRUE(run(cfg, body).ok);
  cfg.inPlace = true;
  const SimResult r = run(cfg, body);
  expectError(r, "conflict within a round");
  expectError(r, "in place");
}

// Rule 3's exception: a local operation may read exactly what a Recv of its round received (the round's
// messages complete first). Reading part of it, or beyond it, is still a conflict.
TEST(SimNegative, ReducingWhatARecvOfTheRoundReceived) {
  const auto body = [](uint64_t readAt) {
    return [readAt](PlanBuilder& b, const PlanParams& p) {
      b.needScratch(16);
      b.send(1 - p.rank, BufRef::send(0), 8);
      b.recv(1 - p.rank, BufRef::scratch(0), 8);
      b.reduce(BufRef::recv(0), {BufRef::send(0), BufRef::scratch(readAt)}, 8);
      b.nextRound();
      b.finalize(BufRef::recv(0), 8);
    };
  };
  const SimResult exact = run(config(Collective::AllReduce, 2, 2), body(0));
  EXPECT_TRUE(exact.ok) << exact.error;
  const SimResult shifted = run(config(Collective::AllReduce, 2, 2), body(4));
  expectError(shifted, "conflict within a round");
  expectError(shifted, "scratch");
}

TEST(SimNegative, DoubleFinalize) {
  const SimResult r = run(config(Collective::AllReduce, 2, 64, RedOp::Avg, 8),
                          [](PlanBuilder& b, const PlanParams& p) { exchangeAllReduce(b, p, 2); });
  expectError(r, "wrong result");
}

TEST(SimNegative, FinalizeOnPartialSum) {
  // Finalize before the peer's contribution arrived: avg of a partial sum.
  const SimResult r = run(config(Collective::AllReduce, 2, 64, RedOp::Avg, 8), [](PlanBuilder& b, const PlanParams& p) {
    b.copy(BufRef::recv(0), BufRef::send(0), 512);
    b.nextRound();
    b.finalize(BufRef::recv(0), 512);
    b.nextRound();
    b.send(1 - p.rank, BufRef::send(0), 512);
    b.recvReduce(1 - p.rank, BufRef::recv(0), BufRef::recv(0), 512);
  });
  expectError(r, "wrong result");
}

TEST(SimNegative, OutOfBounds) {
  const SimResult r = run(config(Collective::AllReduce, 1, 4), [](PlanBuilder& b, const PlanParams&) {
    b.copy(BufRef::recv(8), BufRef::send(0), 16);
  });
  expectError(r, "out of bounds");
  expectError(r, "recv [8, 24)");
}

TEST(SimNegative, PeerScratchIsPrivate) {
  const SimResult r = run(config(Collective::AllReduce, 2, 1), [](PlanBuilder& b, const PlanParams& p) {
    b.copy(BufRef::recv(0), BufRef{BufKind::Scratch, 1 - p.rank, 0}, 4);
  });
  expectError(r, "scratch, which is private");
}

TEST(SimNegative, PeerBufferBeforeTheFirstBarrier) {
  const SimResult r = run(config(Collective::Broadcast, 2, 1), [](PlanBuilder& b, const PlanParams& p) {
    if (p.rank != p.root) b.copy(BufRef::recv(0), BufRef::peerSend(p.root, 0), 4);
    b.nextRound();
    b.barrier();
  });
  expectError(r, "early peer access");
}

TEST(SimNegative, PeerBufferAfterTheLastBarrier) {
  const SimResult r = run(config(Collective::Broadcast, 2, 1), [](PlanBuilder& b, const PlanParams& p) {
    b.barrier();
    b.nextRound();
    if (p.rank != p.root) b.copy(BufRef::recv(0), BufRef::peerSend(p.root, 0), 4);
  });
  expectError(r, "after its last Barrier");
}

TEST(SimNegative, PeerBufferRace) {
  // Both ranks write all of rank 0's recv between the same two barriers.
  const SimResult r = run(config(Collective::AllReduce, 2, 3), [](PlanBuilder& b, const PlanParams& p) {
    b.barrier();
    b.nextRound();
    b.reduce(p.rank == 0 ? BufRef::recv(0) : BufRef::peerRecv(0, 0), {BufRef::peerSend(0, 0), BufRef::peerSend(1, 0)}, 12);
    b.nextRound();
    b.barrier();
  });
  expectError(r, "buffer race");
}

// ReduceSpread: rank 0 reduces the whole vector of both ranks and writes the finished result (avg:
// divided) into both recv buffers at once; the simulator runs the finalize inside the op.
TEST(SimNegative, AcceptsAReduceSpreadIntoEveryRecv) {
  const SimResult r = run(config(Collective::AllReduce, 2, 3, RedOp::Avg), [](PlanBuilder& b, const PlanParams& p) {
    b.barrier();
    b.nextRound();
    if (p.rank == 0) b.reduceSpread(BufRef::recv(0), {BufRef::peerRecv(1, 0)}, {BufRef::send(0), BufRef::peerSend(1, 0)}, 12);
    b.nextRound();
    b.barrier();
  });
  EXPECT_TRUE(r.ok) << r.error;
}

TEST(SimNegative, ReduceSpreadDestinationsThatOverlap) {
  const SimResult r = run(config(Collective::AllReduce, 1, 3), [](PlanBuilder& b, const PlanParams&) {
    b.reduceSpread(BufRef::recv(0), {BufRef::recv(4)}, {BufRef::send(0)}, 8);
  });
  expectError(r, "conflict within a round");
}

TEST(SimNegative, ReduceSpreadToAPeerAfterTheLastBarrier) {
  // Only the extra destination names the peer: the check must look at it too.
  const SimResult r = run(config(Collective::AllReduce, 2, 3), [](PlanBuilder& b, const PlanParams& p) {
    b.barrier();
    b.nextRound();
    if (p.rank == 0) b.reduceSpread(BufRef::recv(0), {BufRef::peerRecv(1, 0)}, {BufRef::send(0)}, 12);
  });
  expectError(r, "after its last Barrier");
}

TEST(SimNegative, MessageNamingAPeerBuffer) {
  const SimResult r = run(config(Collective::AllReduce, 2, 1), [](PlanBuilder& b, const PlanParams& p) {
    b.barrier();
    b.nextRound();
    b.send(1 - p.rank, BufRef::peerSend(1 - p.rank, 0), 4);
    b.recv(1 - p.rank, BufRef::recv(0), 4);
    b.nextRound();
    b.barrier();
  });
  expectError(r, "only local operations may");
}

TEST(SimNegative, WritesSendBuffer) {
  const SimResult r = run(config(Collective::AllReduce, 1, 1), [](PlanBuilder& b, const PlanParams&) {
    b.copy(BufRef::send(0), BufRef::recv(0), 4);
  });
  expectError(r, "send buffer is read-only");
}

TEST(SimNegative, ReduceNonRootWritesRecv) {
  SimConfig cfg = config(Collective::Reduce, 2, 2);
  cfg.params.root = 1;
  const SimResult r = run(cfg, [](PlanBuilder& b, const PlanParams& p) {
    b.copy(BufRef::recv(0), BufRef::send(0), 8);  // the bug: non-roots must leave recv alone
    if (p.rank == 0) {
      b.nextRound();
      b.send(1, BufRef::send(0), 8);
    } else {
      b.nextRound();
      b.recvReduce(0, BufRef::recv(0), BufRef::send(0), 8);
    }
  });
  expectError(r, "rank 0");
  expectError(r, "must not be written");
}

TEST(SimNegative, BarrierCountMismatch) {
  const SimResult r = run(config(Collective::AllReduce, 2, 1), [](PlanBuilder& b, const PlanParams& p) {
    b.copy(BufRef::recv(0), BufRef::send(0), 4);
    b.nextRound();
    b.barrier();
    if (p.rank == 0) {
      b.nextRound();
      b.barrier();
    }
  });
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.error.find("barrier mismatch") != std::string::npos || r.error.find("deadlock") != std::string::npos)
      << r.error;
}

TEST(SimNegative, ZeroByteMessage) {
  const SimResult r = simulate(config(Collective::AllReduce, 2, 1), [](const PlanParams& p) {
    Plan plan;
    Op op;
    op.kind = p.rank == 0 ? OpKind::Send : OpKind::Recv;
    op.peer = 1 - p.rank;
    op.nsrc = p.rank == 0 ? 1 : 0;
    op.dst = BufRef::recv(0);
    plan.sources.push_back(BufRef::send(0));
    plan.ops.push_back(op);
    plan.rounds.push_back({0, 1});
    return plan;
  });
  expectError(r, "zero-byte message");
}

TEST(SimNegative, WrongData) {
  // Forgets the peer's contribution entirely.
  const SimResult r = run(config(Collective::AllReduce, 2, 3), [](PlanBuilder& b, const PlanParams&) {
    b.copy(BufRef::recv(0), BufRef::send(0), 12);
  });
  expectError(r, "wrong result: call 0");
}

TEST(SimNegative, DescribeNamesTheConfiguration) {
  SimConfig cfg = config(Collective::Broadcast, 5, 7, RedOp::Avg);
  cfg.params.root = 3;
  cfg.inPlace = true;
  const std::string d = describe(cfg);
  EXPECT_NE(d.find("broadcast n=5 count=7 elt=4 root=3 op=avg"), std::string::npos) << d;
  EXPECT_NE(d.find("in-place"), std::string::npos) << d;
}

}  // namespace
}  // namespace conflux
