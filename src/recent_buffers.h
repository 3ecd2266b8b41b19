// RecentBuffers: the address ranges this rank's recent calls touched, to tell whether a call's receive
// buffer is likely still in the caches. Copies into a cold receive buffer are cheaper with non-temporal
// stores (they skip reading each line in first), copies into a warm one with ordinary stores (the lines
// are there already, and whoever reads the result next finds it in cache). No instruction says which
// lines are cached, so this keeps a reuse distance instead: a range is warm when a recent call touched
// most of it and the bytes touched since then fit this rank's share of the last-level cache.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace conflux {

class RecentBuffers {
 public:
  /// budgetBytes: how many bytes of recent buffers this rank may count on finding in cache.
  explicit RecentBuffers(uint64_t budgetBytes = 0) : budget_(budgetBytes) {}
  void setBudget(uint64_t budgetBytes) { budget_ = budgetBytes; }

  /// True when ranges touched by the most recent calls cover at least half of [p, p + bytes), counting
  /// only the ranges touched since the budget's worth of bytes (newest first, each range's whole size).
  bool warm(const void* p, uint64_t bytes) const { return warmWithin(p, bytes, budget_); }
  /// As warm(), with a budget of the caller's (a stricter test where a miss costs more).
  bool warmWithin(const void* p, uint64_t bytes, uint64_t budgetBytes) const;
  /// Bytes of recent buffers this rank counts on finding in cache (the constructor's or setBudget's).
  uint64_t budget() const { return budget_; }
  /// Records that the current call touched [p, p + bytes) (it becomes the newest range).
  void touch(const void* p, uint64_t bytes);
  /// One collective's buffers: true when it is out of place and recv is not warm. In place (the ranges
  /// overlap: one buffer, NCCL's in-place all-gather and reduce-scatter layouts) the call reads the
  /// lines it writes, so recv is never cold. Then records the buffers (in place: their union, once).
  bool recordCall(const void* send, uint64_t sendBytes, const void* recv, uint64_t recvBytes);

 private:
  struct Range {
    uintptr_t begin = 0, end = 0;
  };
  static constexpr size_t kKept = 32;  // two per call: 16 calls
  std::array<Range, kKept> ranges_{};  // a ring: ranges_[(next_ - 1) % kKept] is the newest
  size_t next_ = 0;
  size_t kept_ = 0;
  uint64_t budget_;
};

/// Bytes of the largest cache the calling thread's CPU shares, from sysfs
/// (/sys/devices/system/cpu/cpuN/cache); 0 when it cannot be read.
uint64_t lastLevelCacheBytes();

}  // namespace conflux
