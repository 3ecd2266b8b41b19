// The order in which a process group's calls reach its communicator. Every rank must issue the same
// calls in the same order, whatever mix of synchronous, asynchronous, CPU and CUDA calls the program
// makes, so all of them pass through one queue:
//   - asynchronous CPU calls run on the queue's worker thread, in issue order, while the caller goes on
//     (what lets DDP overlap its gradient all-reduces with the backward pass);
//   - synchronous CPU calls and every CUDA call run on the caller's thread ("inline"), but only once
//     everything queued before them has finished, and nothing queued after them starts before they end.
//     A synchronous call on an idle queue therefore costs no thread hand-off.
//   - sends and receives queued back to back run as one batch (a Conflux group), so that an isend and an
//     irecv issued together between two ranks progress concurrently. So that a program's isend and irecv
//     meet in one batch, a send or receive at the head of the queue is held until someone waits for (or
//     polls) one of the calls queued so far (flush), a call of another kind is queued behind it, or
//     kHoldP2p has passed since it was queued.
// The worker only runs calls: their works are completed (and the callbacks chained on their futures
// run) elsewhere (conflux_backend.cc), so a callback may issue calls on the same group and wait for them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace conflux_torch {

class CallQueue {
 public:
  /// A queued call. `run` performs it (and hands its work on for completion). A send or receive (`p2p`)
  /// runs in a batch with the sends and receives queued right after it: the worker calls `begin`
  /// (cfxGroupStart), each member's `run` (which only adds its operation to the group), `end`
  /// (cfxGroupEnd, returning the batch's error message or ""), then each member's `finish` with that message.
  struct Call {
    std::function<void()> run;
    bool p2p = false;
    std::function<void(const std::string& error)> finish;
    uint64_t seq = 0;                                   // set by enqueue
    std::chrono::steady_clock::time_point queuedAt{};   // set by enqueue
  };
  struct Batch {
    std::function<void()> begin;
    std::function<std::string()> end;
  };

  explicit CallQueue(Batch batch);
  ~CallQueue();  ///< stop()
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;

  /// Runs `fn` on this thread, after every call queued earlier and before any queued later.
  void runInline(const std::function<void()>& fn);
  /// Queues `call` for the worker thread; returns its sequence number (for flush).
  uint64_t enqueue(Call call);
  /// Held sends and receives queued up to call `seq` may start now (someone waits for one of them).
  void flush(uint64_t seq);
  /// Waits until every queued call has finished, then stops the worker (idempotent).
  void stop();

  /// How long a send or receive at the head of the queue waits for company before it runs anyway.
  static constexpr std::chrono::milliseconds kHoldP2p{200};

 private:
  void loop();
  bool held(std::chrono::steady_clock::time_point now) const;

  Batch batch_;
  std::mutex mutex_;
  // Two condition variables, so that a synchronous call on an idle queue wakes nobody: the worker waits
  // on workCv_ (work, flush, stop), callers waiting to run inline on idleCv_.
  std::condition_variable workCv_;
  std::condition_variable idleCv_;
  int idleWaiters_ = 0;
  std::deque<Call> queue_;
  size_t pending_ = 0;          // queued or running on the worker
  bool inlineActive_ = false;   // a caller runs a call inline now
  bool stopping_ = false;
  uint64_t queued_ = 0;         // calls ever queued (their sequence numbers are 1..queued_)
  uint64_t flushedUpTo_ = 0;    // held calls with seq <= this may start
  std::thread worker_;
};

}  // namespace conflux_torch
