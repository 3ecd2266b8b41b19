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
// sees at least the one-way handoff; lateness only adds to a sample, so the lowest of the recent samples
// estimates the handoff. Measured on these machines with two pinned processes handing one line back
// and forth: 67-93 ns close together, 254-283 ns far apart, the same in both directions (the clocks of
// the two vCPUs agree); inside collectives the lowest sample read 57-152 ns close, 282-419 ns far.
#pragma once

#include <array>
#include <cstdint>

namespace conflux::shm {

/// A barrier arrival's stamp: the generation's low kStampTagBits bits above the steady-clock time of
/// the arrival in ns, modulo 2^kStampNsBits (78 hours), in one word.
inline constexpr int kStampNsBits = 48;
inline constexpr int kStampTagBits = 64 - kStampNsBits;
inline constexpr uint64_t kStampNsMask = (uint64_t{1} << kStampNsBits) - 1;
inline uint64_t stampTag(uint64_t generation) { return generation & ((uint64_t{1} << kStampTagBits) - 1); }
inline uint64_t barrierStamp(uint64_t generation, uint64_t ns) {
  return stampTag(generation) << kStampNsBits | (ns & kStampNsMask);
}

/// One handoff sample of barrier `generation`, seen complete at `nowNs`: now minus the latest of the
/// peers' arrival stamps (times compared modulo 2^48). -1 when a stamp is another generation's (the
/// sample would be wrong) or when the latest stamp lies ahead of now (the clocks disagree).
int64_t handoffSample(const uint64_t* peerStamps, int n, uint64_t generation, uint64_t nowNs);

class CoreDistance {
 public:
  /// Samples the verdict is taken over (the most recent ones).
  static constexpr int kWindow = 16;
  /// Far apart from when the lowest recent sample is at least this; close again below kCloseNs. Between
  /// the highest lowest-sample measured close together (152 ns) and the lowest far apart (254 ns), with
  /// a gap that keeps a lowest sample near one threshold from flipping the verdict back and forth.
  static constexpr int64_t kFarNs = 220;
  static constexpr int64_t kCloseNs = 190;
  /// Samples above this are a late peer or a wake-up, not a handoff: ignored.
  static constexpr int64_t kMaxSampleNs = 10000;
  /// A verdict with no sample for this long is stale: the rank stopped waiting at barriers (it became
  /// the late one, or its calls went eager) while the host may have moved the cores. It is forgotten:
  /// close again, and a full window is needed before far.
  static constexpr int64_t kStaleNs = 1000000000;

  /// Records one handoff time in ns, taken at `nowNs` (steady clock). Negative samples and those above
  /// kMaxSampleNs are ignored. Returns true when the verdict changed.
  bool add(int64_t ns, int64_t nowNs);
  /// The verdict at `nowNs`: far apart. False until kWindow samples have been seen, and once the last
  /// one is older than kStaleNs.
  bool far(int64_t nowNs) const { return far_ && nowNs - lastNs_ < kStaleNs; }
  /// The lowest of the recent samples (0 before the first).
  int64_t lowest() const;
  /// Samples recorded since the window last started afresh.
  uint64_t samples() const { return count_; }

 private:
  std::array<int64_t, kWindow> recent_{};
  uint64_t count_ = 0;
  int64_t lastNs_ = 0;
  bool far_ = false;
};

}  // namespace conflux::shm
