// The lock-step clock of a group's plans (algorithms/round_alignment.cc), and what the hierarchical
// plans do with it: their segments run one round apart whatever the algorithm between nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/schedule.h"

namespace conflux {
namespace {

using sched::alignRounds;
using sched::RoundClock;

std::vector<Plan> groupPlans(Algo algo, int n, uint64_t count, uint64_t chunkBytes) {
  std::vector<Plan> plans;
  PlanParams p;
  p.nranks = n;
  p.count = count;
  p.chunkBytes = chunkBytes;
  for (int r = 0; r < n; ++r) {
    p.rank = r;
    plans.push_back(buildPlan(algo, p));
  }
  return plans;
}

bool isRecv(OpKind k) { return k == OpKind::Recv || k == OpKind::RecvReduce; }

/// Checks the clock's promises from the plans alone: ticks rise within a plan, the span covers them, and
/// the i-th send of a to b sits on the tick of b's i-th receive from a.
void expectClockHolds(const std::vector<Plan>& plans, const RoundClock& clock, const std::string& what) {
  ASSERT_EQ(clock.tick.size(), plans.size()) << what;
  std::map<std::pair<int, int>, std::vector<int>> sends, recvs;  // (from, to) -> ticks in plan order
  int last = -1;
  for (size_t v = 0; v < plans.size(); ++v) {
    ASSERT_EQ(clock.tick[v].size(), plans[v].rounds.size()) << what;
    for (size_t r = 0; r < plans[v].rounds.size(); ++r) {
      const int t = clock.tick[v][r];
      if (r > 0) {
        EXPECT_GT(t, clock.tick[v][r - 1]) << what << ": rank " << v << " round " << r;
      }
      last = std::max(last, t);
      const Round& round = plans[v].rounds[r];
      for (uint32_t i = 0; i < round.numOps; ++i) {
        const Op& op = plans[v].ops[round.firstOp + i];
        if (op.kind == OpKind::Send) sends[{int(v), op.peer}].push_back(t);
        if (isRecv(op.kind)) recvs[{op.peer, int(v)}].push_back(t);
      }
    }
  }
  EXPECT_EQ(clock.span, last + 1) << what;
  EXPECT_EQ(sends, recvs) << what;
}

TEST(RoundAlignment, RhdFoldedRanksWaitForTheirResult) {
  for (int n : {2, 3, 5, 6, 7, 12}) {
    const std::vector<Plan> plans = groupPlans(Algo::RecHalvingDoubling, n, 1000, 0);
    const std::optional<RoundClock> clock = alignRounds(plans);
    ASSERT_TRUE(clock) << "rhd n=" << n;
    expectClockHolds(plans, *clock, "rhd n=" + std::to_string(n));
    // Unchunked: fold-in, log2 P halvings, Finalize, log2 P doublings, fold-out (no folds for a power of
    // two).
    const int P = sched::largestPowerOfTwo(n), steps = __builtin_ctz(static_cast<unsigned>(P));
    EXPECT_EQ(clock->span, 2 * steps + 1 + (P == n ? 0 : 2)) << "rhd n=" << n;
    if (P != n) {
      // Rank 0 folds in and sits out: its fold-out receive lands on the last tick, not its second round.
      ASSERT_EQ(plans[0].rounds.size(), 2u);
      EXPECT_EQ(clock->tick[0][1], clock->span - 1);
    }
  }
}

TEST(RoundAlignment, ChunkedPlansOfEveryInterNodeAlgorithmAlign) {
  for (Algo algo : {Algo::Ring, Algo::RecHalvingDoubling, Algo::DoubleBinaryTree, Algo::BinomialTree}) {
    for (int n : {2, 3, 4, 5, 9}) {
      const std::string what = std::string(algoName(algo)) + " n=" + std::to_string(n);
      const std::vector<Plan> plans = groupPlans(algo, n, 4099, 256);
      const std::optional<RoundClock> clock = alignRounds(plans);
      ASSERT_TRUE(clock) << what;
      expectClockHolds(plans, *clock, what);
    }
  }
}

TEST(RoundAlignment, ACycleThatLockStepCannotMeetHasNoClock) {
  // Rank 0 receives from 1 before sending to it; rank 1 does the same: each receive would have to come
  // after the other's send in lock-step (a buffered transport could run it; a common clock cannot exist).
  std::vector<Plan> plans(2);
  for (int v = 0; v < 2; ++v) {
    PlanBuilder b("cycle");
    b.recv(1 - v, BufRef::recv(0), 8);
    b.nextRound();
    b.send(1 - v, BufRef::send(0), 8);
    plans[size_t(v)] = b.finish();
  }
  EXPECT_FALSE(alignRounds(plans));
  // Unpaired messages: a send nobody receives.
  PlanBuilder lone("lone");
  lone.send(1, BufRef::send(0), 8);
  EXPECT_FALSE(alignRounds({lone.finish(), PlanBuilder("idle").finish()}));
}

/// Ticks of `clock` where some plan sends or receives.
int communicatingTicks(const std::vector<Plan>& plans, const RoundClock& clock) {
  std::vector<bool> used(size_t(clock.span), false);
  for (size_t v = 0; v < plans.size(); ++v) {
    for (size_t r = 0; r < plans[v].rounds.size(); ++r) {
      const Round& round = plans[v].rounds[r];
      for (uint32_t i = 0; i < round.numOps; ++i) {
        const OpKind k = plans[v].ops[round.firstOp + i].kind;
        if (k == OpKind::Send || isRecv(k)) used[size_t(clock.tick[v][r])] = true;
      }
    }
  }
  return int(std::count(used.begin(), used.end(), true));
}

std::shared_ptr<const NodeLayout> blocks(int nodes, int perNode) {
  std::vector<int> nodeOf;
  for (int r = 0; r < nodes * perNode; ++r) nodeOf.push_back(r / perNode);
  return std::make_shared<const NodeLayout>(NodeLayout::fromNodeOf(nodeOf));
}

TEST(RoundAlignment, HierarchicalSegmentsRunOneRoundApartWithEveryInterNodeAlgorithm) {
  // L chunks per segment, 40 segments: the plan lasts segments - 1 rounds more than one segment's
  // phases A, B, C and F; when segments followed each other in phase B (rhd, dbtree) it lasted
  // (segments - 1) x B more.
  for (auto [N, L] : {std::pair{3, 2}, {4, 2}, {5, 1}, {6, 3}}) {
    const uint64_t chunkElems = 64, segments = 40;
    for (Algo algo : {Algo::Hierarchical, Algo::HierarchicalRhd, Algo::HierarchicalDbtree}) {
      PlanParams p;
      p.nranks = N * L;
      p.count = segments * chunkElems * static_cast<uint64_t>(L);
      p.chunkBytes = chunkElems * 4;
      p.layout = blocks(N, L);
      // Phase B's span: the inner algorithm's plans for one shard, on their common clock, less the ticks
      // where they only finalize (phase F divides).
      const Algo inner = algo == Algo::Hierarchical ? Algo::Ring
                         : algo == Algo::HierarchicalRhd ? Algo::RecHalvingDoubling : Algo::DoubleBinaryTree;
      const std::vector<Plan> innerPlans = groupPlans(inner, N, chunkElems, p.chunkBytes);
      const std::optional<RoundClock> clock = alignRounds(innerPlans);
      ASSERT_TRUE(clock);
      const size_t perSegment = size_t(2 * (L - 1) + communicatingTicks(innerPlans, *clock) + 1);
      for (int r = 0; r < p.nranks; ++r) {
        p.rank = r;
        const Plan plan = buildPlan(algo, p);
        // A rank idle at the first or last tick of phase B (rhd's fold with one rank per node) has no
        // round there: one fewer at each end.
        EXPECT_LE(plan.rounds.size(), perSegment + segments - 1) << algoName(algo) << " " << N << "x" << L << " rank " << r;
        EXPECT_GE(plan.rounds.size(), perSegment + segments - 3) << algoName(algo) << " " << N << "x" << L << " rank " << r;
      }
    }
  }
}

}  // namespace
}  // namespace conflux
