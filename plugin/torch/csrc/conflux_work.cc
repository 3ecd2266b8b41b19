#include "conflux_work.h"

#include <c10/util/Exception.h>

#include <utility>

namespace conflux_torch {

ConfluxWork::ConfluxWork(int rank, c10d::OpType type, uint64_t seq, const char* title,
                         std::vector<at::Tensor> outputs, std::vector<c10::Device> devices,
                         std::chrono::milliseconds timeout, std::function<void()> onTimeout)
    : Work(rank, type, title),
      seq_(seq),
      title_(title),
      outputs_(std::move(outputs)),
      devices_(std::move(devices)),
      timeout_(timeout),
      onTimeout_(std::move(onTimeout)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()), devices_)) {}

ConfluxWork::~ConfluxWork() = default;

std::exception_ptr ConfluxWork::backendError(const std::string& message) {
  return std::make_exception_ptr(c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, message));
}

void ConfluxWork::complete(std::exception_ptr error) {
  // The future first: callbacks chained on it (DDP) may run inside markCompleted. For CUDA work this
  // runs right after the enqueue on the caller's stream, so the future records its events there.
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

bool ConfluxWork::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

void ConfluxWork::flushIfPending() {
  if (onWait_ && !done()) onWait_();
}

bool ConfluxWork::isCompleted() {
  flushIfPending();
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool ConfluxWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr ConfluxWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

bool ConfluxWork::wait(std::chrono::milliseconds timeout) {
  flushIfPending();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (timeout == kNoTimeout) {
      cv_.wait(lock, [&] { return completed_; });
    } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
      lock.unlock();
      // Give up: abort the communicator so that this call and every rank's calls end with an error
      // instead of waiting on, then report the timeout.
      if (onTimeout_) onTimeout_();
      throw c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                  "conflux: " + title_ + " (#" + std::to_string(seq_) + ") did not finish within " +
                                      std::to_string(timeout.count()) + " ms; the communicator was aborted");
    }
    if (exception_) std::rethrow_exception(exception_);
  }
  synchronize();
  return true;
}

void ConfluxWork::synchronize() {
  // CUDA work: the current streams wait for the events the future recorded after the enqueue.
  if (!devices_.empty()) future_->wait();
}

c10::intrusive_ptr<c10::ivalue::Future> ConfluxWork::getFuture() {
  flushIfPending();
  return future_;
}

std::vector<at::Tensor> ConfluxWork::result() { return outputs_; }

}  // namespace conflux_torch
