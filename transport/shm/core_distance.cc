#include "transport/shm/core_distance.h"

#include <algorithm>

namespace conflux::shm {

int64_t handoffSample(const uint64_t* peerStamps, int n, uint64_t generation, uint64_t nowNs) {
  uint64_t last = 0;
  for (int i = 0; i < n; ++i) {
    if (peerStamps[i] >> kStampNsBits != stampTag(generation)) return -1;
    const uint64_t ns = peerStamps[i] & kStampNsMask;
    // Modulo 2^48 ns: a time is later when it is less than half the range ahead.
    if (i == 0 || ((ns - last) & kStampNsMask) < kStampNsMask / 2) last = ns;
  }
  if (n == 0) return -1;
  const uint64_t age = (nowNs - last) & kStampNsMask;
  return age < kStampNsMask / 2 ? static_cast<int64_t>(age) : -1;
}

bool CoreDistance::add(int64_t ns, int64_t nowNs) {
  if (ns < 0 || ns > kMaxSampleNs) return false;
  const bool wasFar = far(nowNs);
  if (count_ > 0 && nowNs - lastNs_ >= kStaleNs) {  // start afresh: the old samples say nothing of now
    count_ = 0;
    far_ = false;
  }
  recent_[count_ % kWindow] = ns;
  ++count_;
  lastNs_ = nowNs;
  const int64_t low = lowest();
  if (!far_ && count_ >= kWindow && low >= kFarNs) far_ = true;
  else if (far_ && low < kCloseNs) far_ = false;
  return far_ != wasFar;
}

int64_t CoreDistance::lowest() const {
  if (count_ == 0) return 0;
  const auto n = static_cast<std::ptrdiff_t>(std::min<uint64_t>(count_, kWindow));
  return *std::min_element(recent_.begin(), recent_.begin() + n);
}

}  // namespace conflux::shm
