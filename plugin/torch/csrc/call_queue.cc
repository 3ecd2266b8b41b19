#include "call_queue.h"

#include <utility>
#include <vector>

namespace conflux_torch {

CallQueue::CallQueue(Batch batch) : batch_(std::move(batch)) { worker_ = std::thread([this] { loop(); }); }

CallQueue::~CallQueue() { stop(); }

void CallQueue::stop() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!worker_.joinable()) return;
    flushedUpTo_ = queued_;
    workCv_.notify_all();
    ++idleWaiters_;
    idleCv_.wait(lock, [&] { return pending_ == 0 && !inlineActive_; });
    --idleWaiters_;
    stopping_ = true;
  }
  workCv_.notify_all();
  worker_.join();
}

void CallQueue::runInline(const std::function<void()>& fn) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (pending_ > 0 || inlineActive_) {
      if (flushedUpTo_ < queued_) {  // the calls before this one must not wait for company
        flushedUpTo_ = queued_;
        workCv_.notify_all();
      }
      ++idleWaiters_;
      idleCv_.wait(lock, [&] { return pending_ == 0 && !inlineActive_; });
      --idleWaiters_;
    }
    inlineActive_ = true;
  }
  struct Release {
    CallQueue* q;
    ~Release() {
      std::lock_guard<std::mutex> lock(q->mutex_);
      q->inlineActive_ = false;
      if (!q->queue_.empty()) q->workCv_.notify_all();  // queued meanwhile: the worker may start
      if (q->idleWaiters_ > 0) q->idleCv_.notify_all();
    }
  } release{this};
  fn();
}

uint64_t CallQueue::enqueue(Call call) {
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    seq = call.seq = ++queued_;
    call.queuedAt = std::chrono::steady_clock::now();
    queue_.push_back(std::move(call));
    ++pending_;
  }
  workCv_.notify_all();
  return seq;
}

void CallQueue::flush(uint64_t seq) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (seq <= flushedUpTo_) return;
    flushedUpTo_ = seq;
  }
  workCv_.notify_all();
}

bool CallQueue::held(std::chrono::steady_clock::time_point now) const {
  const Call& head = queue_.front();
  if (!head.p2p || stopping_ || head.seq <= flushedUpTo_) return false;
  if (!queue_.back().p2p) return false;  // a call of another kind follows: nothing more will join
  return now < head.queuedAt + kHoldP2p;
}

void CallQueue::loop() {
  for (;;) {
    std::vector<Call> calls;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      for (;;) {
        if (stopping_ && queue_.empty()) return;
        if (!queue_.empty() && !inlineActive_) {
          const auto now = std::chrono::steady_clock::now();
          if (!held(now)) break;
          workCv_.wait_until(lock, queue_.front().queuedAt + kHoldP2p);
          continue;
        }
        workCv_.wait(lock);
      }
      // One call, or every send and receive queued back to back.
      calls.push_back(std::move(queue_.front()));
      queue_.pop_front();
      while (calls.front().p2p && !queue_.empty() && queue_.front().p2p) {
        calls.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
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
      if (pending_ == 0 && idleWaiters_ > 0) idleCv_.notify_all();
    }
  }
}

}  // namespace conflux_torch
