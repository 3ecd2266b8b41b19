// Ranks that are threads of one test process: a reusable barrier and an all-gather among them, for
// transports' set-up (their NetOpenArgs::allGather) and for keeping ranks in step.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace conflux::testing {

/// Reusable barrier and one all-gather for ranks that are threads of this process.
class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n), blobs_(size_t(n)) {}

  std::vector<uint8_t> allGather(int rank, const std::vector<uint8_t>& mine) {
    {
      std::lock_guard<std::mutex> lock(m_);
      blobs_[size_t(rank)] = mine;
    }
    barrier();
    std::vector<uint8_t> all;
    {
      std::lock_guard<std::mutex> lock(m_);
      for (const auto& b : blobs_) all.insert(all.end(), b.begin(), b.end());
    }
    barrier();
    return all;
  }

  void barrier() {
    std::unique_lock<std::mutex> lock(m_);
    const int gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait_for(lock, std::chrono::seconds(120), [&] { return generation_ != gen; });
  }

 private:
  int n_;
  std::mutex m_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int generation_ = 0;
  std::vector<std::vector<uint8_t>> blobs_;
};

}  // namespace conflux::testing
