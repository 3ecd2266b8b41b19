// ProcessGroupConflux: torch.distributed's c10d::Backend over a Conflux communicator, for CPU and CUDA
// tensors. One communicator per process group, met through the c10d store torch hands the backend (rank
// 0 publishes the unique id); new_group and split_group make a fresh one the same way, through the new
// group's store. Calls keep every rank's issue order through one CallQueue (call_queue.h); CUDA calls
// are enqueued on the caller's current stream. Each call returns a ConfluxWork (conflux_work.h).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "call_queue.h"
#include "comm_handle.h"
#include "conflux/conflux.h"
#include "conflux_work.h"
#include "grouped_calls.h"

namespace conflux_torch {

class ProcessGroupConflux : public c10d::Backend {
 public:
  /// Joins the group's communicator through `store` (collective over the group; blocks until every
  /// rank arrived or `timeout` passed). `globalRanks`: the group's global ranks (empty: the world).
  ProcessGroupConflux(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout, std::string groupName, std::vector<uint64_t> globalRanks);
  /// A group split from another: takes over `comm` (made by cfxCommCreateGroup of the parent's).
  ProcessGroupConflux(cfxComm_t comm, int rank, int size, std::chrono::milliseconds timeout, std::string groupName,
                      std::vector<uint64_t> globalRanks);
  ~ProcessGroupConflux() override;

  const std::string getBackendName() const override { return "conflux"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  bool supportsSplitting() const override { return true; }
  bool supportsCoalescing() const override { return true; }
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  c10d::ErrorType getError() override;
  void abort() override;
  void shutdown() override;

  /// split_group: called on every rank of this group; `ranks` (ranks of this group, in the new group's
  /// order) is this rank's new group, or one it is not in (then it gets nullptr and touches no store).
  /// The members make a communicator of their own with cfxCommCreateGroup of this group's, in order with
  /// this group's calls (so it sends through this group's network endpoints, where it spans nodes).
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
#if CONFLUX_TORCH_HAS_SHRINK
  bool supportsShrinking() const override { return true; }
  /// torch.distributed.shrink_group: called by every rank of this group that is not in `excluded` (ranks
  /// of this group), each with the same list, also after this group failed (a rank died or stalled):
  /// cfxCommShrink. SHRINK_ABORT aborts this group's calls first (a call blocked on a dead peer returns
  /// at once instead of at the timeout); SHRINK_DEFAULT runs in order behind them.
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& excluded, int flags,
                                           const c10::intrusive_ptr<Options>& opts) override;
#endif
  /// new_group with a bound device: what torch asks of a rank outside the new group (nothing to do).
  void performNocolorSplit(at::Device device);

  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather_single(at::Tensor& output, at::Tensor& input,
                                               const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(at::Tensor& output, at::Tensor& input,
                                                       const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& outputSplits,
                                                   std::vector<int64_t>& inputSplits,
                                                   const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  /// One call's Conflux part: `before` (optional) runs first, in queue order (copies into temporaries,
  /// so that they see what calls queued earlier wrote); `issue` makes the Conflux calls on `stream`
  /// (null for CPU tensors) and returns the first failure; `after` (optional) runs once they completed or
  /// were enqueued (copies out of temporaries). A coalesced batch runs every `before`, then every issue
  /// in one Conflux group, then every `after`.
  struct Step {
    std::function<cfxResult_t(cfxStream_t)> issue;
    std::function<void()> after;
    std::function<void(std::exception_ptr)> done;  ///< optional: told the outcome after the work completed
    /// optional: the message of the first failure, kept by `issue` when later calls overwrite the
    /// thread's last error (a coalesced batch)
    std::shared_ptr<std::string> message;
    std::function<void()> before;  ///< optional (last, so that {issue, after} initialises the others)
  };

 private:
  /// Both constructors' end: holds `comm`, starts the worker.
  void start(cfxComm_t comm);
  /// The common path of every call: makes its work and runs `step` inline, on the worker, or into the
  /// coalesced batch (see call_queue.h). `touched`: every tensor the call reads or writes (picks CPU or
  /// the CUDA device); `outputs`: the work's result.
  c10::intrusive_ptr<c10d::Work> issue(c10d::OpType type, const char* title, const std::vector<at::Tensor>& touched,
                                       std::vector<at::Tensor> outputs, bool asyncOp, std::chrono::milliseconds timeout,
                                       Step step, bool p2p = false);
  /// Runs `step` now (on this thread or the worker) and completes `work`: right here, or (`deferred`, on
  /// the worker) on torch's inter-op thread pool, so that the callbacks chained on the work's future may
  /// issue calls on this group and wait for them.
  void runStep(const c10::intrusive_ptr<ConfluxWork>& work, const Step& step, bool cuda, int device, bool deferred);
  std::chrono::milliseconds timeoutOf(std::chrono::milliseconds requested) const;
  /// The message of a failed Conflux call (`message`, else the thread's last error), with the group's
  /// ranks put in global terms.
  std::string failure(const char* title, cfxResult_t r, const std::string& message = "") const;
  cfxComm_t comm() const { return handle_->comm; }
  void checkPeer(int peer, const char* what) const;

  std::shared_ptr<CommHandle> handle_;
  std::chrono::milliseconds timeout_;
  std::string groupName_;
  std::vector<uint64_t> globalRanks_;
  std::atomic<uint64_t> seq_{0};
  std::shared_ptr<CallQueue> queue_;  // shared: sends' and receives' works flush it (weakly) when waited on

  // Coalescing (startCoalescing .. endCoalescing): the calls made in between, run as one group.
  struct Deferred {
    Step step;
    c10::intrusive_ptr<ConfluxWork> work;
    std::vector<at::Tensor> touched;
  };
  bool coalescing_ = false;
  std::vector<Deferred> coalesced_;
};

/// A Step whose Conflux calls form one group: body(first, stream) makes them, passing each call's result
/// to `first` (grouped_calls.h); the first failure's message is kept for the error.
template <class Body>
ProcessGroupConflux::Step groupedStep(Body body) {
  ProcessGroupConflux::Step step;
  step.message = std::make_shared<std::string>();
  step.issue = [body = std::move(body), message = step.message](cfxStream_t stream) {
    return grouped(message.get(), [&](FirstError& first) { body(first, stream); });
  };
  return step;
}

/// Whether the Conflux library in use accepts CUDA device buffers (asked once).
bool libraryHasCuda();

}  // namespace conflux_torch
