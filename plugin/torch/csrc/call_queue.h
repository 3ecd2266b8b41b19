// The order in which a process group's calls reach its communicator. Every rank must issue the same
// calls in the same order, whatever mix of synchronous, asynchronous, CPU and CUDA calls the program
// makes, so all of them pass through one queue:
//   - asynchronous CPU calls run on the queue's worker thread, in issue order, while the caller goes on
//     (what lets DDP overlap its gradient all-reduces with the backward pass);
//   - synchronous CPU calls and every CUDA call run on the caller's thread ("inline"), but only once
//     everything queued before them has finished, and nothing queued after them starts before they end.
//     A synchronous call on an idle queue therefore costs no thread hand-off; a CUDA call only enqueues
//     kernels on the caller's stream, so running it inline never blocks the host for the collective.
//   - sends and receives queued back to back run as one batch (a Conflux group), so that an isend and
//     an irecv queued together between two ranks progress concurrently. To let a program's isend and
//     irecv meet in one batch, a send or receive at the head of the queue is held until someone waits
//     for one (flush), a call of another kind is queued behind it, or kHoldP2p has passed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <string>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace conflux_torch {

class CallQueue {
 public:
  /// A queued call. `run` performs it (and completes its work). A send or receive (`p2p`) runs in a
  /// batch with the sends and receives queued right after it: the worker calls `begin` (cfxGroupStart),
  /// each member's `run` (which only adds its operation to the group), `end` (cfxGroupEnd, returning the
  /// batch's error message or ""), then each member's `finish` with that message.
  struct Call {
    std::function<void()> run;
    bool p2p = false;
    std::function<void(const std::string& error)> finish;
  };
  struct Batch {
    std::function<void()> begin;
    std::function<std::string()> end;
  };

  explicit CallQueue(Batch batch);
  ~CallQueue();  ///< finishes the queued calls, then stops the worker
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;

  /// Runs `fn` on this thread, after every call queued earlier and before any queued later.
  void runInline(const std::function<void()>& fn);
  /// Queues `call` for the worker thread.
  void enqueue(Call call);
  /// Waits until every queued call has finished.
  void drain();
  /// Starts the held sends and receives now (someone waits for one of them).
  void flush();

  /// How long a send or receive at the head of the queue waits for company before it runs anyway.
  static constexpr std::chrono::milliseconds kHoldP2p{2};

 private:
  void loop();

  Batch batch_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Call> queue_;
  size_t pending_ = 0;        // queued or running on the worker
  bool inlineActive_ = false; // a caller runs a call inline now
  bool stopping_ = false;
  bool flush_ = false;        // held sends and receives may start
  std::chrono::steady_clock::time_point heldSince_{};
  std::thread worker_;
};

}  // namespace conflux_torch
