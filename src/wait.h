// What every waiting rank shares, whether it runs a plan (executor.cc) or an eager call (eager.cc): the
// pause instruction of its spin, the pacing of its health checks, and how an abort or an error posted by
// another rank becomes this call's Status.
#pragma once

#include <chrono>
#include <string>

#include "src/executor.h"

#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace conflux {

using WaitClock = std::chrono::steady_clock;

/// The largest CONFLUX_SPIN_US: no abort, health or timeout check runs while a rank spins.
inline constexpr int64_t kMaxSpinUs = 10000;

/// How often (at most) a waiting rank polls its peers' liveness, and the longest single sleep.
inline constexpr auto kLivenessInterval = std::chrono::milliseconds(50);
inline constexpr int kMaxSleepMs = 50;

/// One iteration of a spin-wait.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

/// The cheap part of a wait, before a rank blocks: spin with a pause (CONFLUX_SPIN_COUNT polls, then for
/// CONFLUX_SPIN_US more), then, where the ranks outnumber the CPUs they may use (core/cpu_budget.h), yield the CPU a few times
/// (CONFLUX_YIELD_COUNT) so that a peer that can make progress runs before this rank pays for a futex
/// sleep and wake-up.
///
/// Why spin for a time: a futex sleep and wake-up costs 20-50 us on the VMs measured (bench_shm pingpong
/// spin:0), far more than a few microseconds of polling, so a rank that blocks soon pays a wake-up
/// whenever its peer is only briefly late (an interrupt, the other library of a side-by-side benchmark
/// finishing), and the call is a wake-up longer when the peer then waits for it. Spinning about as long as
/// a wake-up costs bounds that loss to about twice the best choice (the classic spin-then-block rule).
/// Measured in short sweeps beside Open MPI (tools/slow_calls.sh): benches of 20 calls whose slowest took
/// over 10 us, 1.6-3.1% without the time, 0.3-1.4% with 50 us (Open MPI, which never blocks, 2.1-3.2%),
/// means unchanged. With
/// more ranks than CPUs the time part is off (spinNs 0): there a spin holds the CPU the peer needs.
class Backoff {
 public:
  explicit Backoff(const ExecEnv& env)
      : spinCount_(env.spinCount), yieldCount_(env.yieldCount), spinNs_(env.spinNs), budgetNs_(env.spinNs) {}
  /// Something moved: start spinning from scratch.
  void progressed() {
    idle_ = yields_ = 0;
    timed_ = false;
    budgetNs_ = spinNs_;
  }
  /// Something moved on the slow path: spin again, but keep the yields already spent.
  void respin() {
    idle_ = 0;
    timed_ = false;
    budgetNs_ = spinNs_;
  }
  /// After a wake-up: spin a little (half the polls and half the time) before blocking again.
  void woke() {
    idle_ = spinCount_ / 2;
    timed_ = false;
    budgetNs_ = spinNs_ / 2;
  }
  /// Nothing moved: pauses or yields and returns true (poll again), or returns false (time to block).
  bool pause() {
    if (++idle_ < spinCount_ || spinningForTime()) {
      cpuRelax();
      return true;
    }
    if (yields_ < yieldCount_) {
      ++yields_;
      sched_yield();
      idle_ = spinCount_;  // poll once more after the yield
      return true;
    }
    return false;
  }

 private:
  /// Past the polls: whether the time budget still runs. The clock is read when the polls run out and
  /// then every kClockEvery polls, so waits shorter than the polls never read it.
  bool spinningForTime() {
    static constexpr int kClockEvery = 16;
    if (budgetNs_ <= 0) return false;
    if (!timed_) {
      timed_ = true;
      timedFrom_ = WaitClock::now();
      return true;
    }
    if ((idle_ - spinCount_) % kClockEvery != 0) return true;
    if (WaitClock::now() - timedFrom_ < std::chrono::nanoseconds(budgetNs_)) return true;
    budgetNs_ = 0;  // spent: the next pause goes on to the yields
    return false;
  }

  int spinCount_;
  int yieldCount_;
  int64_t spinNs_;
  int64_t budgetNs_;
  int64_t idle_ = 0;
  int yields_ = 0;
  bool timed_ = false;
  WaitClock::time_point timedFrom_{};
};

/// Aborted, or an error is posted in this rank's slot: the Status to return (naming where this rank was,
/// `where()`, when another rank posted it); Ok otherwise. `where` is only called on failure.
template <class Where>
Status interruption(const ExecEnv& env, Where&& where) {
  if (env.aborted != nullptr && env.aborted->load(std::memory_order_acquire)) {
    return Status(Code::Aborted, "communicator aborted during " + where());
  }
  if (auto e = env.local->error()) {
    if (e->reporterRank == env.rank) return Status(static_cast<Code>(e->code), e->message);
    return Status(static_cast<Code>(e->code), "rank " + std::to_string(e->reporterRank) + " reported: " +
                                                  e->message + " [this rank was in " + where() + "]");
  }
  return Status::ok();
}

}  // namespace conflux
