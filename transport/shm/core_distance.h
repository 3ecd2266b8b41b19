// Whether the cores the local ranks run on are far apart now, judged from barrier handoffs.
//
// Virtual machines here keep their two vCPUs either close together (a cache line's round trip of
// 50-140 ns in `conflux-perf cores`) or far apart (450-600 ns: different cache complexes of the host), and
// the host switches between the two every few seconds to minutes. Far apart, a line one core wrote and
// the other reads crosses slowly, and staging copies are made of such lines; streaming them to memory
// is then faster, close together it is slower (docs/performance-method.md, "What helps when the vCPUs
// are far apart").
//
// The measure: every barrier arrival stores its steady-clock time beside the arrival count; a member
// that waited at the barrier and saw it complete takes now minus the last arrival's time, the time the
// arriving store took to become visible to it (plus its poll's delay). A waiter that was already polling
// sees at least the one-way handoff; skew between arrivals only adds to a sample, so the lowest of the
// recent samples estimates the handoff. Measured on these machines with two pinned processes polling
// one line: 67-93 ns close together, 254-283 ns far apart, the same in both directions (the clocks of
// the two vCPUs agree).
#pragma once

#include <array>
#include <cstdint>

namespace conflux::shm {

class CoreDistance {
 public:
  /// Samples the verdict is taken over (the most recent ones).
  static constexpr int kWindow = 16;
  /// Far apart from when the lowest recent sample is at least this; close again below kCloseNs (the gap
  /// keeps a lowest sample near one threshold from flipping the verdict back and forth).
  static constexpr int64_t kFarNs = 180;
  static constexpr int64_t kCloseNs = 140;

  /// Records one handoff time in ns (negative ones, from clocks that disagree, are ignored). Returns true
  /// when the verdict changed.
  bool add(int64_t ns);
  /// The verdict: far apart. False until kWindow samples have been seen.
  bool far() const { return far_; }
  /// The lowest of the recent samples (0 before the first).
  int64_t lowest() const;
  /// Samples recorded so far.
  uint64_t samples() const { return count_; }

 private:
  std::array<int64_t, kWindow> recent_{};
  uint64_t count_ = 0;
  bool far_ = false;
};

}  // namespace conflux::shm
