#include "core_probe.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/cli_numbers.h"
#include "sysinfo.h"

namespace cfxperf {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kHandoffBytes = size_t{1} << 20;
constexpr int kRoundTrips = 20000;  // per sample: ~2-10 ms
constexpr int kHandoffs = 100;      // per sample: ~5-50 ms

bool pinThread(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// The two cores' shared words, each on its own cache line.
struct Lines {
  alignas(64) std::atomic<uint64_t> request{0};
  alignas(64) std::atomic<uint64_t> reply{0};
  alignas(64) std::atomic<bool> copy{false};
};

struct Sample {
  double roundTripNs = 0;
  double handoffUs = 0;
};

/// Samples of both measurements; the responder runs on `b` and answers each request (copying the
/// buffer first when asked to).
std::vector<Sample> measure(int a, int b, int samples, bool& pinned) {
  Lines lines;
  std::vector<unsigned char> buf(kHandoffBytes), out(kHandoffBytes);
  std::atomic<bool> responderPinned{false};
  std::thread responder([&] {
    responderPinned = pinThread(b);
    uint64_t seen = 0;
    for (;;) {
      uint64_t r;
      while ((r = lines.request.load(std::memory_order_acquire)) == seen) {
      }
      seen = r;
      if (r == ~uint64_t{0}) return;
      if (lines.copy.load(std::memory_order_relaxed)) std::memcpy(out.data(), buf.data(), buf.size());
      lines.reply.store(r, std::memory_order_release);
    }
  });
  pinned = pinThread(a);
  uint64_t k = 0;
  auto call = [&] {
    lines.request.store(++k, std::memory_order_release);
    while (lines.reply.load(std::memory_order_acquire) != k) {
    }
  };
  std::vector<Sample> result;
  for (int s = 0; s < samples; ++s) {
    Sample x;
    lines.copy = false;
    const auto t0 = Clock::now();
    for (int i = 0; i < kRoundTrips; ++i) call();
    const auto t1 = Clock::now();
    lines.copy = true;
    for (int i = 0; i < kHandoffs; ++i) {
      std::memset(buf.data(), i, buf.size());
      call();
    }
    const auto t2 = Clock::now();
    x.roundTripNs = std::chrono::duration<double, std::nano>(t1 - t0).count() / kRoundTrips;
    x.handoffUs = std::chrono::duration<double, std::micro>(t2 - t1).count() / kHandoffs;
    result.push_back(x);
  }
  lines.request.store(~uint64_t{0}, std::memory_order_release);
  responder.join();
  pinned = pinned && responderPinned;
  return result;
}

void printStats(const char* what, std::vector<double> v, const char* unit, double extraPerValue = 0) {
  std::sort(v.begin(), v.end());
  const double median = v[v.size() / 2];
  std::printf("# %s: %.1f %s, median of %zu (min %.1f, max %.1f)", what, median, unit, v.size(), v.front(), v.back());
  if (extraPerValue > 0) std::printf(", %.1f GB/s", extraPerValue / median / 1e3);
  std::printf("\n");
}

int usage(const char* error) {
  if (error != nullptr) std::fprintf(stderr, "conflux-perf cores: %s\n", error);
  std::fprintf(error ? stderr : stdout,
               "usage: conflux-perf cores [--cores A,B] [--samples N]\n"
               "  How fast cores A and B (default 0,1) hand data to each other now: the round trip of one\n"
               "  cache line, and 1 MiB written on A and copied on B. On virtual machines both change when\n"
               "  the host moves the vCPUs (docs/performance-method.md). N samples each (default 9, 1..1000).\n");
  return error ? 2 : 0;
}

}  // namespace

int runCoreProbe(int argc, char** argv) {
  int a = 0, b = 1, samples = 9;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") return usage(nullptr);
    if (i + 1 >= argc) return usage(("missing the value of " + arg).c_str());
    const std::string value = argv[++i];
    if (arg == "--cores") {
      const size_t comma = value.find(',');
      if (comma == std::string::npos || !conflux::cli::parseInt(value.substr(0, comma), 0, CPU_SETSIZE - 1, &a) ||
          !conflux::cli::parseInt(value.substr(comma + 1), 0, CPU_SETSIZE - 1, &b) || a == b) {
        return usage("--cores takes two different core numbers, as 0,1");
      }
    } else if (arg == "--samples") {
      if (!conflux::cli::parseInt(value, 1, 1000, &samples)) return usage("--samples takes 1..1000");
    } else {
      return usage(("unknown flag " + arg).c_str());
    }
  }
  if (std::max(a, b) >= onlineCores()) {
    std::fprintf(stderr, "conflux-perf cores: this machine has %d online cores; cores %d and %d do not both exist\n",
                 onlineCores(), a, b);
    return 2;
  }
  bool pinned = false;
  const std::vector<Sample> s = measure(a, b, samples, pinned);
  if (!pinned) {
    std::fprintf(stderr, "conflux-perf cores: could not pin the threads to cores %d and %d (affinity %s)\n", a, b,
                 affinityList().c_str());
    return 1;
  }
  std::printf("# conflux-perf cores: cores %d and %d of %d (%s)\n", a, b, onlineCores(), cpuModel().c_str());
  std::vector<double> rtt, handoff;
  for (const Sample& x : s) {
    rtt.push_back(x.roundTripNs);
    handoff.push_back(x.handoffUs);
  }
  printStats("round trip of a cache line", rtt, "ns");
  printStats("1 MiB written on one core, copied on the other", handoff, "us", static_cast<double>(kHandoffBytes));
  return 0;
}

}  // namespace cfxperf
