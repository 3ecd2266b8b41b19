// The spin-then-block policy of a waiting rank (src/wait.h's Backoff): how many polls, how long, and what
// resets them. Time bounds are checked from below only (a loaded machine may make a spin longer, never
// shorter), with a generous ceiling that catches a spin that never ends.
#include <gtest/gtest.h>

#include <chrono>

#include "src/wait.h"

namespace {

using conflux::Backoff;
using conflux::ExecEnv;
using Clock = std::chrono::steady_clock;

ExecEnv envWith(int spinCount, int64_t spinNs, int yieldCount = 0) {
  ExecEnv env;
  env.spinCount = spinCount;
  env.spinNs = spinNs;
  env.yieldCount = yieldCount;
  return env;
}

/// Pauses until the backoff says to block; returns how many pauses said "poll again" and how long it took.
struct Spun {
  int64_t polls = 0;
  Clock::duration took{};
};
Spun spinUntilBlock(Backoff& b) {
  Spun s;
  const auto t0 = Clock::now();
  while (b.pause()) {
    if (++s.polls > (int64_t{1} << 40)) break;  // never: a guard for the loop
  }
  s.took = Clock::now() - t0;
  return s;
}

TEST(Backoff, WithoutATimeBudgetItBlocksAfterTheSpinCount) {
  const ExecEnv env = envWith(100, 0);
  Backoff b(env);
  EXPECT_EQ(spinUntilBlock(b).polls, 99);  // the 100th pause blocks
}

TEST(Backoff, WithATimeBudgetItPollsForAtLeastThatLongAfterTheCount) {
  const auto budget = std::chrono::milliseconds(5);
  const ExecEnv env = envWith(100, std::chrono::nanoseconds(budget).count());
  Backoff b(env);
  const Spun s = spinUntilBlock(b);
  EXPECT_GE(s.took, budget);
  EXPECT_GT(s.polls, 99);
  EXPECT_LT(s.took, std::chrono::seconds(5));  // it ends
  // Spent: the next pause blocks at once, until something resets it.
  EXPECT_FALSE(b.pause());
}

TEST(Backoff, ProgressGivesTheWholeTimeBudgetBack) {
  const auto budget = std::chrono::milliseconds(4);
  const ExecEnv env = envWith(10, std::chrono::nanoseconds(budget).count());
  Backoff b(env);
  spinUntilBlock(b);
  b.progressed();
  EXPECT_GE(spinUntilBlock(b).took, budget);
  b.respin();
  EXPECT_GE(spinUntilBlock(b).took, budget);
}

// Half, not all: the budget is long enough that a spin of the whole of it cannot end within 3/4 of it
// even after a preemption of a scheduler slice or two on a loaded machine.
TEST(Backoff, AWakeUpGivesHalfTheTimeBudget) {
  const auto budget = std::chrono::milliseconds(400);
  const ExecEnv env = envWith(10, std::chrono::nanoseconds(budget).count());
  Backoff b(env);
  spinUntilBlock(b);
  b.woke();
  const Spun s = spinUntilBlock(b);
  EXPECT_GE(s.took, budget / 2);
  EXPECT_LT(s.took, budget * 3 / 4);
}

TEST(Backoff, TheTimeBudgetComesBeforeTheYields) {
  const auto budget = std::chrono::milliseconds(3);
  const ExecEnv env = envWith(5, std::chrono::nanoseconds(budget).count(), 3);
  Backoff b(env);
  const Spun s = spinUntilBlock(b);
  EXPECT_GE(s.took, budget);
  EXPECT_GT(s.polls, 4 + 3);  // polls past the count for the time, then the 3 yields
}

TEST(Backoff, YieldsComeAfterTheSpinAndBeforeBlocking) {
  const ExecEnv env = envWith(5, 0, 3);
  Backoff b(env);
  EXPECT_EQ(spinUntilBlock(b).polls, 4 + 3);  // 4 pauses, then 3 yields, then block
}

}  // namespace
