// Helpers shared by the Google Benchmark microbenchmarks (perf/micro): page-aligned pre-faulted buffers,
// decimal GB/s counters, size labels, and pinning a thread to one CPU for the duration of a benchmark.
// See docs/performance-method.md for what each benchmark measures and how to run it.
#pragma once

#include <benchmark/benchmark.h>
#include <sched.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace conflux::bench {

/// A page-aligned heap buffer whose pages are touched (faulted in) at construction, so that no
/// benchmark iteration pays for first-touch page faults.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    ptr_.reset(static_cast<std::byte*>(std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded)));
    if (!ptr_) {
      std::fprintf(stderr, "bench: out of memory allocating %zu bytes\n", bytes);
      std::abort();
    }
    std::memset(ptr_.get(), 0, rounded);
  }
  std::byte* data() { return ptr_.get(); }
  const std::byte* data() const { return ptr_.get(); }
  size_t size() const { return bytes_; }

 private:
  static constexpr size_t kAlign = 4096;
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> ptr_;
  size_t bytes_ = 0;
};

/// A rate counter in decimal GB/s (10^9 bytes per second): `bytes` is the total over all iterations.
/// With several benchmark threads the per-thread rates are averaged (kAvgThreads).
inline benchmark::Counter gbps(double bytes) {
  return benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate | benchmark::Counter::kAvgThreads);
}

/// "64KiB", "1MiB", "512B": binary units, exact when the size is a power of two.
inline std::string sizeLabel(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + units[u];
}

/// Number of CPUs this process may run on.
inline int allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return CPU_COUNT(&set);
}

/// Pins the calling thread to CPU `cpu` (modulo the online CPUs) and restores its previous affinity at
/// scope exit. Does nothing when `cpu` < 0.
class ScopedPin {
 public:
  explicit ScopedPin(int cpu) {
    if (cpu < 0) return;
    CPU_ZERO(&saved_);
    if (sched_getaffinity(0, sizeof saved_, &saved_) != 0) return;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<int>(cpu % (online > 0 ? online : 1)), &set);
    active_ = sched_setaffinity(0, sizeof set, &set) == 0;
  }
  ~ScopedPin() {
    if (active_) sched_setaffinity(0, sizeof saved_, &saved_);
  }
  ScopedPin(const ScopedPin&) = delete;
  ScopedPin& operator=(const ScopedPin&) = delete;

 private:
  cpu_set_t saved_;
  bool active_ = false;
};

}  // namespace conflux::bench
