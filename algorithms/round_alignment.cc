// Lock-step alignment of a group's plans: a common clock on which both ends of every message sit in the
// same tick.
//
// Plans number their rounds per rank: a rank that sits out part of an algorithm (recursive
// halving-doubling's folded ranks, the double binary tree's leaves before their chunk arrives) simply has
// fewer rounds, and its k-th round may meet its peer's m-th. That is enough for one plan on its own
// (messages match in FIFO order per pair), but not for several copies of it run a tick apart, as the
// hierarchical plans run their segments: copies must not reorder one pair's messages, which holds when
// the sender and the receiver of each message emit it in the same tick.
//
// The clock is the least fixpoint of
//   T[v][r] >= T[v][r-1] + 1                 (a rank's rounds stay in order, one tick or more apart)
//   T[a][ra] == T[b][rb]                     (for each message: a's send round, b's matching receive)
// found by raising, from T[v][r] = r, each matched pair to the later of its two ticks and pushing the
// following rounds up, until nothing moves. Every raise is forced, so the result is the earliest clock
// there is; a plan set that needs unbounded ticks (a cycle of messages that lock-step cannot meet) is
// reported as not alignable after a bounded number of passes.
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "algorithms/schedule.h"

namespace conflux::sched {

std::optional<RoundClock> alignRounds(const std::vector<Plan>& plans) {
  const size_t n = plans.size();
  RoundClock clock;
  clock.tick.resize(n);
  size_t totalRounds = 0;
  for (size_t v = 0; v < n; ++v) {
    clock.tick[v].resize(plans[v].rounds.size());
    for (size_t r = 0; r < clock.tick[v].size(); ++r) clock.tick[v][r] = static_cast<int>(r);
    totalRounds += plans[v].rounds.size();
  }
  // Each pair's sends and receives, in plan order: the i-th send matches the i-th receive.
  std::map<std::pair<int, int>, std::pair<std::vector<int>, std::vector<int>>> pairs;
  for (size_t v = 0; v < n; ++v) {
    const Plan& plan = plans[v];
    for (size_t r = 0; r < plan.rounds.size(); ++r) {
      const Round& round = plan.rounds[r];
      for (uint32_t i = 0; i < round.numOps; ++i) {
        const Op& op = plan.ops[round.firstOp + i];
        if (op.peer < 0 || static_cast<size_t>(op.peer) >= n || static_cast<size_t>(op.peer) == v) continue;
        if (op.kind == OpKind::Send) pairs[{static_cast<int>(v), op.peer}].first.push_back(static_cast<int>(r));
        else if (op.kind == OpKind::Recv || op.kind == OpKind::RecvReduce)
          pairs[{op.peer, static_cast<int>(v)}].second.push_back(static_cast<int>(r));
      }
    }
  }
  struct Match {
    int a, ra, b, rb;
  };
  std::vector<Match> matches;
  for (const auto& [key, lists] : pairs) {
    if (lists.first.size() != lists.second.size()) return std::nullopt;  // unmatched messages
    for (size_t i = 0; i < lists.first.size(); ++i) matches.push_back({key.first, lists.first[i], key.second, lists.second[i]});
  }
  // A pass either raises some tick or ends the search; a tick beyond every round count times two means
  // the ticks chase each other (no lock-step clock exists).
  const int bound = static_cast<int>(2 * totalRounds + 2);
  for (size_t pass = 0; pass <= totalRounds + 1; ++pass) {
    bool moved = false;
    for (const Match& m : matches) {
      int& x = clock.tick[size_t(m.a)][size_t(m.ra)];
      int& y = clock.tick[size_t(m.b)][size_t(m.rb)];
      if (x != y) {
        x = y = std::max(x, y);
        moved = true;
      }
    }
    for (auto& ticks : clock.tick) {
      for (size_t r = 1; r < ticks.size(); ++r) {
        if (ticks[r] <= ticks[r - 1]) {
          ticks[r] = ticks[r - 1] + 1;
          moved = true;
        }
      }
      if (!ticks.empty() && ticks.back() > bound) return std::nullopt;
    }
    if (!moved) {
      for (const auto& ticks : clock.tick) clock.span = std::max(clock.span, ticks.empty() ? 0 : ticks.back() + 1);
      return clock;
    }
  }
  return std::nullopt;
}

}  // namespace conflux::sched
