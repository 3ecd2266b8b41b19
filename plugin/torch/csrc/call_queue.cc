#include "call_queue.h"

#include <utility>

namespace conflux_torch {

CallQueue::CallQueue(Batch batch) : batch_(std::move(batch)) { worker_ = std::thread([this] { loop(); }); }

CallQueue::~CallQueue() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return pending_ == 0 && !inlineActive_; });
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void CallQueue::runInline(const std::function<void()>& fn) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    flush_ = true;  // calls before this one must not wait for company
    cv_.notify_all();
    cv_.wait(lock, [&] { return pending_ == 0 && !inlineActive_; });
    inlineActive_ = true;
  }
  struct Release {
    CallQueue* q;
    ~Release() {
      {
        std::lock_guard<std::mutex> lock(q->mutex_);
        q->inlineActive_ = false;
      }
      q->cv_.notify_all();
    }
  } release{this};
  fn();
}

void CallQueue::enqueue(Call call) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty()) heldSince_ = std::chrono::steady_clock::now();
    queue_.push_back(std::move(call));
    ++pending_;
  }
  cv_.notify_all();
}

void CallQueue::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  flush_ = true;
  cv_.notify_all();
  cv_.wait(lock, [&] { return pending_ == 0; });
}

void CallQueue::flush() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    flush_ = true;
  }
  cv_.notify_all();
}

void CallQueue::loop() {
  for (;;) {
    std::vector<Call> calls;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      for (;;) {
        if (stopping_ && queue_.empty()) return;
        if (!queue_.empty() && !inlineActive_) {
          // A send or receive first waits a moment for the rest of its exchange (see the header).
          const bool held = queue_.front().p2p && !flush_ && !stopping_ && queue_.back().p2p;
          if (!held) break;
          const auto until = heldSince_ + kHoldP2p;
          if (std::chrono::steady_clock::now() >= until) break;
          cv_.wait_until(lock, until);
          continue;
        }
        cv_.wait(lock);
      }
      // One call, or every send and receive queued back to back.
      calls.push_back(std::move(queue_.front()));
      queue_.pop_front();
      while (calls.front().p2p && !queue_.empty() && queue_.front().p2p) {
        calls.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      if (queue_.empty()) flush_ = false;
      heldSince_ = std::chrono::steady_clock::now();  // the next head's hold starts now
    }
    if (!calls.front().p2p) {
      calls.front().run();
    } else {
      batch_.begin();
      for (Call& c : calls) c.run();
      const std::string error = batch_.end();
      for (Call& c : calls) c.finish(error);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_ -= calls.size();
    }
    cv_.notify_all();
  }
}

}  // namespace conflux_torch
