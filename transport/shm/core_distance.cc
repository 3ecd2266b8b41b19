#include "transport/shm/core_distance.h"

#include <algorithm>

namespace conflux::shm {

bool CoreDistance::add(int64_t ns) {
  if (ns < 0) return false;
  recent_[count_ % kWindow] = ns;
  ++count_;
  const int64_t low = lowest();
  const bool wasFar = far_;
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
