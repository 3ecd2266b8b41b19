#include "src/recent_buffers.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace conflux {

bool RecentBuffers::warmWithin(const void* p, uint64_t bytes, uint64_t budgetBytes) const {
  if (bytes == 0) return true;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  uint64_t seen = 0, covered = 0;
  for (size_t i = 1; i <= kept_; ++i) {
    const Range& r = ranges_[(next_ + kKept - i) % kKept];
    seen += r.end - r.begin;
    if (seen > budgetBytes) break;  // evicted by the bytes touched since
    const uintptr_t lo = std::max(begin, r.begin), hi = std::min(end, r.end);
    if (lo < hi) covered += hi - lo;  // overlapping ranges may count twice: a guess either way
    if (2 * covered >= bytes) return true;
  }
  return false;
}

void RecentBuffers::touch(const void* p, uint64_t bytes) {
  if (bytes == 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(p);
  ranges_[next_] = Range{begin, begin + bytes};
  next_ = (next_ + 1) % kKept;
  kept_ = std::min(kept_ + 1, kKept);
}

bool RecentBuffers::recordCall(const void* send, uint64_t sendBytes, const void* recv, uint64_t recvBytes) {
  const auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  if (s < r + recvBytes && r < s + sendBytes) {
    const uintptr_t lo = std::min(s, r), hi = std::max(s + sendBytes, r + recvBytes);
    touch(reinterpret_cast<const void*>(lo), hi - lo);
    return false;
  }
  const bool cold = !warm(recv, recvBytes);
  touch(send, sendBytes);
  touch(recv, recvBytes);
  return cold;
}

namespace {

/// "32768K" / "1M" / "524288" as bytes; 0 when unreadable.
uint64_t parseCacheSize(const std::string& s) {
  size_t used = 0;
  uint64_t v = 0;
  try {
    v = std::stoull(s, &used);
  } catch (...) {
    return 0;
  }
  const char unit = used < s.size() ? s[used] : '\0';
  if (unit == 'K') return v << 10;
  if (unit == 'M') return v << 20;
  if (unit == 'G') return v << 30;
  return v;
}

}  // namespace

uint64_t lastLevelCacheBytes() {
  const int cpu = std::max(0, sched_getcpu());
  const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cache/index";
  int bestLevel = -1;
  uint64_t best = 0;
  for (int i = 0; i < 16; ++i) {
    std::ifstream levelFile(dir + std::to_string(i) + "/level"), sizeFile(dir + std::to_string(i) + "/size");
    int level = 0;
    std::string size;
    if (!(levelFile >> level) || !(sizeFile >> size)) break;
    if (level > bestLevel) {
      bestLevel = level;
      best = parseCacheSize(size);
    }
  }
  return best;
}

}  // namespace conflux
