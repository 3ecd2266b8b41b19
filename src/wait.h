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

/// How often (at most) a waiting rank polls its peers' liveness, and the longest single sleep.
inline constexpr auto kLivenessInterval = std::chrono::milliseconds(50);
inline constexpr int kMaxSleepMs = 50;

/// One iteration of a spin-wait.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

/// The cheap part of a wait, before a rank blocks: spin with a pause (CONFLUX_SPIN_COUNT polls), then,
/// on nodes with more ranks than cores, yield the core a few times (CONFLUX_YIELD_COUNT) so that a peer
/// that can make progress runs before this rank pays for a futex sleep and wake-up.
class Backoff {
 public:
  explicit Backoff(const ExecEnv& env) : spinCount_(env.spinCount), yieldCount_(env.yieldCount) {}
  /// Something moved: start spinning from scratch.
  void progressed() { idle_ = yields_ = 0; }
  /// Something moved on the slow path: spin again, but keep the yields already spent.
  void respin() { idle_ = 0; }
  /// After a wake-up: spin a little before blocking again.
  void woke() { idle_ = spinCount_ / 2; }
  /// Nothing moved: pauses or yields and returns true (poll again), or returns false (time to block).
  bool pause() {
    if (++idle_ < spinCount_) {
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
  int spinCount_;
  int yieldCount_;
  int idle_ = 0;
  int yields_ = 0;
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
