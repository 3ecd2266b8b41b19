// What the net plugin's process-pair tests share: a logger that counts warnings (a clean run logs none),
// and the NCCL-style loops that retry a NULL request and poll test() until done, each bounded by 30 s.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <thread>

#include "pair_harness.h"
#include "plugin/net_loader.h"

namespace conflux::plugintest {

inline std::atomic<int> warnings{0};    // warnings the plugin logged in this process (any thread)
inline const char* phase = "setup";     // named in the loops' failures

inline void countingLogger(int level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level > conflux::plugin::abi::kLogWarn) return;
  ++warnings;
  va_list args;
  va_start(args, fmt);
  std::fprintf(stderr, "plugin WARN: ");
  std::vfprintf(stderr, fmt, args);
  std::fprintf(stderr, "\n");
  va_end(args);
}

inline constexpr auto kPollLimit = std::chrono::seconds(30);

/// Repeats `post` until it yields a request (NCCL retries a NULL request).
template <class F>
void* postUntil(F&& post) {
  const auto until = std::chrono::steady_clock::now() + kPollLimit;
  for (;;) {
    void* req = nullptr;
    PT_CHECK(post(&req) == 0);
    if (req != nullptr) return req;
    PT_CHECK(std::chrono::steady_clock::now() < until, "no request within 30 s (phase: %s)", phase);
    std::this_thread::yield();
  }
}

/// Polls test() until the request is done; `sizes` receives what it moved.
inline void waitDone(conflux::plugin::NetApi& net, void* req, int* sizes) {
  const auto until = std::chrono::steady_clock::now() + kPollLimit;
  int done = 0;
  while (!done) {
    PT_CHECK(net.test(req, &done, sizes) == 0);
    PT_CHECK(done || std::chrono::steady_clock::now() < until, "request not done within 30 s (phase: %s)", phase);
  }
}

}  // namespace conflux::plugintest
