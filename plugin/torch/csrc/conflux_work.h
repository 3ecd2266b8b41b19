// The Work a conflux process-group call returns: it completes when the call has run (CPU tensors) or has
// been enqueued on the caller's CUDA stream (CUDA tensors), and carries a future whose value is the
// list of output tensors, as torch's own backends do (DDP's comm hooks read value()[0]).
//
// Waiting: wait() without a timeout blocks until completion; the library fails a call that makes no
// progress for the communicator's timeout, so that returns. wait(timeout) past its limit aborts the
// communicator (every rank's pending calls then fail instead of hanging) and raises DistBackendError.
// For CUDA work, wait() makes the current stream wait for the call (no host synchronisation).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace conflux_torch {

class ConfluxWork : public c10d::Work {
 public:
  /// `outputs` become the future's value; `devices` are the CUDA devices the call runs on (empty for CPU).
  /// `onTimeout` aborts the communicator when wait(timeout) gives up.
  ConfluxWork(int rank, c10d::OpType type, uint64_t seq, const char* title, std::vector<at::Tensor> outputs,
              std::vector<c10::Device> devices, std::chrono::milliseconds timeout,
              std::function<void()> onTimeout);
  ~ConfluxWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;
  uint64_t getSequencenumber() const override { return seq_; }
  /// What the call was, for messages ("allreduce", ...).
  const std::string& title() const { return title_; }
  std::chrono::milliseconds getTimeout() const override { return timeout_; }

  /// Called when someone waits for (or polls) this work before it completed: a send or receive held for
  /// company starts.
  void setOnWait(std::function<void()> fn) { onWait_ = std::move(fn); }

  /// Completes the work: the future gets the outputs, or `error` (a DistBackendError).
  void complete(std::exception_ptr error = nullptr);
  /// isCompleted() without starting held calls.
  bool done() const;
  /// A DistBackendError with `message`, as an exception_ptr.
  static std::exception_ptr backendError(const std::string& message);

 private:
  const uint64_t seq_;
  const std::string title_;
  std::vector<at::Tensor> outputs_;
  std::vector<c10::Device> devices_;
  const std::chrono::milliseconds timeout_;
  std::function<void()> onTimeout_;
  std::function<void()> onWait_;
  void flushIfPending();
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace conflux_torch
