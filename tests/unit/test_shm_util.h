// Helpers for the shared-memory transport tests: rank processes made with fork(), a LocalExchange over a
// shared anonymous mapping created before the fork, per-test temporary directories and job tags, a
// spin-then-sleep wait, and a check macro for children (gtest assertions in a child would be lost).
#pragma once

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/child_processes.h"
#include "transport/shm/shm_world.h"

/// In a child process: prints the failed condition and exits with status 3.
#define SHM_CHECK(cond)                                                                   \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "[pid %d] %s:%d: check failed: %s\n", int(::getpid()), __FILE__, \
                   __LINE__, #cond);                                                      \
      std::fflush(stderr);                                                                \
      ::_exit(3);                                                                         \
    }                                                                                     \
  } while (0)

namespace shmtest {

inline double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Unique hex job tag for one test.
inline std::string makeTag() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%06x%08x", unsigned(::getpid()) & 0xffffffu, unsigned(rd()));
  return buf;
}

/// Number of entries in `dir` whose name contains "conflux-<tag>".
inline int countSegments(const std::string& dir, const std::string& tag) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().filename().string().find("conflux-" + tag) != std::string::npos) ++n;
  return n;
}

/// A fresh directory under /tmp, removed with its contents at scope exit.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/cfx-shm-test-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    if (p == nullptr) std::abort();
    path = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// Shared area mapped before fork: exchange slots, a setup barrier, and scratch space for results.
struct SharedArea {
  static constexpr int kMaxRanks = 8;
  static constexpr size_t kSlotBytes = 512;
  std::atomic<uint32_t> arrived{0};
  std::atomic<uint32_t> generation{0};
  uint8_t slots[kMaxRanks][kSlotBytes];
  std::atomic<uint64_t> words[64];  ///< Free for tests (timings, flags).
  double values[kMaxRanks][16];     ///< Free for tests (per-rank results).
};

/// Runs `n` rank processes that share a SharedArea and a LocalExchange over it.
class Ranks {
 public:
  explicit Ranks(int n) : n_(n) {
    void* p = ::mmap(nullptr, sizeof(SharedArea), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    area_ = new (p) SharedArea();
  }
  ~Ranks() {
    children_.reset();  // kills and reaps the children still running, before their area goes
    ::munmap(area_, sizeof(SharedArea));
  }
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  SharedArea& area() { return *area_; }
  int size() const { return n_; }

  /// Setup barrier among the n children (yields while waiting; gives up after 20 s).
  void barrier() {
    const uint32_t gen = area_->generation.load(std::memory_order_acquire);
    if (area_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(n_)) {
      area_->arrived.store(0, std::memory_order_relaxed);
      area_->generation.fetch_add(1, std::memory_order_release);
      return;
    }
    const double deadline = nowUs() + 20e6;
    for (int i = 0; area_->generation.load(std::memory_order_acquire) == gen; ++i) {
      if (i > 100) ::usleep(50);
      else sched_yield();
      SHM_CHECK(nowUs() < deadline);
    }
  }

  /// LocalExchange for `rank` (valid in a child).
  conflux::shm::LocalExchange exchange(int rank) {
    conflux::shm::LocalExchange ex;
    ex.allGather = [this, rank](const std::vector<uint8_t>& mine) {
      SHM_CHECK(mine.size() <= SharedArea::kSlotBytes);
      std::memcpy(area_->slots[rank], mine.data(), mine.size());
      barrier();
      std::vector<uint8_t> all(mine.size() * n_);
      for (int r = 0; r < n_; ++r) std::memcpy(all.data() + r * mine.size(), area_->slots[r], mine.size());
      barrier();  // nobody overwrites a slot before everyone has read it
      return all;
    };
    ex.barrier = [this] { barrier(); };
    return ex;
  }

  /// Forks the children (tests/common/child_processes.h); child r runs body(r) and exits 0 (1 after a
  /// gtest failure, 2 on an uncaught exception).
  void start(const std::function<void(int rank)>& body) {
    children_ = std::make_unique<conflux::testing::ChildProcesses>(n_);
    waited_.assign(size_t(n_), false);
    children_->start([&body](int r) {
      body(r);
      return 0;
    });
  }

  pid_t pid(int rank) const { return children_->pid(rank); }

  /// Waits for one child; returns its exit code (128 + signal when killed, -1 on timeout). What it
  /// reported of a failure is printed.
  int wait(int rank, double timeoutSec = 25) {
    waited_[size_t(rank)] = true;
    const conflux::testing::ChildOutcome o =
        children_->wait(rank, std::chrono::milliseconds(static_cast<long long>(timeoutSec * 1000)));
    if (!o.failure.empty()) std::fprintf(stderr, "%s\n", o.describe().c_str());
    if (o.timedOut) return -1;
    return o.signal != 0 ? 128 + o.signal : o.exitCode;
  }

  /// Waits for all children and expects each to exit 0.
  void expectAllOk(double timeoutSec = 25) {
    for (int r = 0; r < n_; ++r) {
      if (!waited_[size_t(r)]) {
        EXPECT_EQ(wait(r, timeoutSec), 0) << "rank " << r;
      }
    }
  }

  /// start() + expectAllOk().
  void run(const std::function<void(int rank)>& body) {
    start(body);
    expectAllOk();
  }

 private:
  int n_;
  SharedArea* area_ = nullptr;
  std::unique_ptr<conflux::testing::ChildProcesses> children_;
  std::vector<bool> waited_;
};

/// Config for rank `rank` of `n` with small channels and staging (tests run up to 8 ranks).
inline conflux::shm::ShmConfig smallConfig(const std::string& dir, const std::string& tag, int rank, int n,
                                           size_t channelBytes = 64 << 10, size_t stagingBytes = 64 << 10) {
  conflux::shm::ShmConfig c;
  c.dir = dir;
  c.jobTag = tag;
  c.localRank = rank;
  c.localSize = n;
  for (int r = 0; r < n; ++r) c.globalRanks.push_back(100 + r);
  c.channelBytes = channelBytes;
  c.stagingBytes = stagingBytes;
  return c;
}

/// LocalExchange for a world of one rank in this process.
inline conflux::shm::LocalExchange soloExchange() {
  conflux::shm::LocalExchange ex;
  ex.allGather = [](const std::vector<uint8_t>& mine) { return mine; };
  ex.barrier = [] {};
  return ex;
}

/// Spin up to `spin` polls, then sleep on the doorbell until pred() or timeoutMs. Returns pred().
template <class Pred>
bool waitFor(conflux::shm::ShmWorld& w, Pred pred, int spin = 200, int timeoutMs = 20000) {
  for (int i = 0; i < spin; ++i)
    if (pred()) return true;
  const double deadline = nowUs() + timeoutMs * 1e3;
  for (;;) {
    const uint32_t seen = w.doorbell();  // read BEFORE re-checking, so a ring in between is not lost
    if (pred()) return true;
    if (nowUs() > deadline) return false;
    w.sleep(seen, 100);
  }
}

}  // namespace shmtest
