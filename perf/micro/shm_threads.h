// Running several shared-memory ranks as threads of one benchmark process: an in-process LocalExchange,
// unique job tags, the spin-then-sleep wait every Conflux waiter uses, and ThreadRanks, which starts the
// helper ranks. Segments, channels and doorbells are exactly those of separate processes.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "core/config.h"
#include "transport/shm/shm_world.h"

namespace conflux::bench {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// Polls pred() up to `spin` times, then sleeps on the doorbell until pred() (each sleep is capped at
/// 50 ms, so a condition signalled outside the transport cannot hang a benchmark).
template <class Pred>
void waitFor(shm::ShmWorld& w, Pred pred, int spin) {
  for (int i = 0; i < spin; ++i) {
    if (pred()) return;
    cpuRelax();
  }
  for (;;) {
    const uint32_t seen = w.doorbell();  // before the re-check, so that a ring in between is not lost
    if (pred()) return;
    w.sleep(seen, 50);
  }
}

/// LocalExchange among n threads of this process (all-gather through slots and a std::barrier).
/// Every rank must call ShmWorld::create concurrently, each from its own thread.
class ThreadExchange {
 public:
  explicit ThreadExchange(int n) : n_(n), sync_(n), slots_(n) {}
  shm::LocalExchange forRank(int r) {
    shm::LocalExchange ex;
    ex.allGather = [this, r](const std::vector<uint8_t>& mine) {
      slots_[r] = mine;
      sync_.arrive_and_wait();
      std::vector<uint8_t> all;
      for (int i = 0; i < n_; ++i) all.insert(all.end(), slots_[i].begin(), slots_[i].end());
      sync_.arrive_and_wait();  // nobody overwrites a slot before everyone has read it
      return all;
    };
    ex.barrier = [this] { sync_.arrive_and_wait(); };
    return ex;
  }

 private:
  int n_;
  std::barrier<> sync_;
  std::vector<std::vector<uint8_t>> slots_;
};

/// A job tag (hex) unique within this machine for the life of this process.
inline std::string uniqueTag() {
  static std::atomic<unsigned> counter{0};
  char buf[32];
  std::snprintf(buf, sizeof buf, "b%06x%06x", static_cast<unsigned>(getpid()) & 0xffffffu,
                counter.fetch_add(1) & 0xffffffu);
  return buf;
}

/// n ranks: rank 0's world lives here (for the benchmark thread), ranks 1..n-1 run `body` in helper
/// threads until `stop` is set: the destructor sets it, rings every helper and joins them. Helpers that run
/// the executor can use `stop` as ExecEnv::aborted.
class ThreadRanks {
 public:
  using Body = std::function<void(shm::ShmWorld& w, int rank, const std::atomic<bool>& stop)>;

  ThreadRanks(int n, const Body& body, size_t stagingBytes = 4096) : exchange_(n) {
    const int ncpu = std::max(1, allowedCpus());
    shm::ShmConfig base;
    base.jobTag = uniqueTag();
    base.dir = config::getString(config::Var::SHM_DIR);
    base.localSize = n;
    for (int r = 0; r < n; ++r) base.globalRanks.push_back(r);
    base.channelBytes = static_cast<size_t>(config::getInt(config::Var::SHM_CHANNEL_BYTES));
    base.stagingBytes = stagingBytes;
    for (int r = 1; r < n; ++r) {
      helpers_.emplace_back([this, base, r, ncpu, body] {
        ScopedPin pin(r % ncpu);
        shm::ShmConfig cfg = base;
        cfg.localRank = r;
        std::unique_ptr<shm::ShmWorld> w;
        try {
          w = shm::ShmWorld::create(cfg, exchange_.forRank(r));
        } catch (const std::exception& e) {
          std::fprintf(stderr, "bench: rank %d: %s\n", r, e.what());
          std::abort();  // the other ranks would wait for this one forever
        }
        body(*w, r, stop_);
      });
    }
    pin_ = std::make_unique<ScopedPin>(0);
    shm::ShmConfig cfg = base;
    cfg.localRank = 0;
    try {
      world_ = shm::ShmWorld::create(cfg, exchange_.forRank(0));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench: rank 0: %s\n", e.what());
      std::abort();  // the helper threads would wait for rank 0 forever
    }
  }
  ~ThreadRanks() {
    stop_.store(true);
    for (int r = 1; r < world_->localSize(); ++r) world_->wakePeer(r);
    for (auto& t : helpers_) t.join();
  }
  ThreadRanks(const ThreadRanks&) = delete;
  ThreadRanks& operator=(const ThreadRanks&) = delete;

  shm::ShmWorld& world() { return *world_; }

 private:
  ThreadExchange exchange_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> helpers_;
  std::unique_ptr<ScopedPin> pin_;
  std::unique_ptr<shm::ShmWorld> world_;
};

}  // namespace conflux::bench
