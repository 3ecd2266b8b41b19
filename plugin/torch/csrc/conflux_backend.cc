// ProcessGroupConflux: set-up (rendezvous through the c10d store), lifetime, splitting, coalescing and
// the one path every call takes (issue/runStep). The collectives themselves are in conflux_collectives.cc.
#include "conflux_backend.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#if CONFLUX_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace conflux_torch {
namespace {

// Store keys, under the group's own prefix (torch hands each group a PrefixStore) and a generation:
// every rank counts itself in when it joins, so the n ranks of one init share a generation, and a group
// made again on a store that keeps its keys (torchrun's agent store) meets under fresh ones.
struct Keys {
  std::string id, arrived, allArrived, hostPrefix;
  Keys(c10d::Store& store, int size) {
    const int64_t ticket = store.add("conflux/joined", 1);
    const std::string gen = "conflux/" + std::to_string((ticket - 1) / size) + "/";
    id = gen + "unique_id";
    arrived = gen + "arrived";
    allArrived = gen + "all_arrived";
    hostPrefix = gen + "host/";
  }
};

/// This process's node, as Conflux names it for tests and simulated nodes (CONFLUX_HOSTID), else the
/// host name: only used to tell whether the group's ranks share one machine.
std::string hostIdentity() {
  if (const char* id = std::getenv("CONFLUX_HOSTID"); id != nullptr && *id != '\0') return id;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

/// Whether the group's ranks run on more than one node, so that rank 0's rendezvous must listen on an
/// address the other nodes reach. Every rank counts itself under its host's key; rank 0 compares its
/// host's count with the group size once all have arrived. Skipped (false) when CONFLUX_SOCKET_IFNAME
/// chooses the interface anyway, or for one rank.
bool groupSpansNodes(c10d::Store& store, const Keys& keys, int rank, int size) {
  const char* ifname = std::getenv("CONFLUX_SOCKET_IFNAME");
  if (size == 1 || (ifname != nullptr && *ifname != '\0')) return false;
  const std::string hostKey = keys.hostPrefix + hostIdentity();
  store.add(hostKey, 1);
  if (store.add(keys.arrived, 1) == size) store.set(keys.allArrived, std::vector<uint8_t>{1});
  if (rank != 0) return false;
  store.wait({keys.allArrived});
  return store.add(hostKey, 0) != size;
}

cfxConfig_t configFor(std::chrono::milliseconds timeout, const std::string& name) {
  cfxConfig_t cfg = CFX_CONFIG_INITIALIZER;
  cfg.timeoutMs = static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, INT32_MAX));
  cfg.commName = name.empty() ? nullptr : name.c_str();
  return cfg;
}

}  // namespace

bool libraryHasCuda() {
  static const bool has = [] {
    unsigned int f = 0;
    return cfxGetFeatures(&f) == cfxSuccess && (f & CFX_FEATURE_CUDA) != 0;
  }();
  return has;
}

ProcessGroupConflux::ProcessGroupConflux(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                         std::chrono::milliseconds timeout, std::string groupName,
                                         std::vector<uint64_t> globalRanks)
    : Backend(rank, size), handle_(std::make_shared<CommHandle>()), timeout_(timeout),
      groupName_(std::move(groupName)), globalRanks_(std::move(globalRanks)) {
  TORCH_CHECK(store, "conflux: the process group has no store to meet through");
  // Rank 0 makes the unique id (a fresh random secret, and the rendezvous address) and publishes it
  // through torch's store; the others read it from there. No port or variable of our own is needed.
  cfxUniqueId id{};
  const Keys keys(*store, size);
  const bool spans = groupSpansNodes(*store, keys, rank, size);
  if (rank == 0) {
    TORCH_CHECK(cfxGetUniqueIdForNodes(&id, spans ? 1 : 0) == cfxSuccess, "conflux: ", cfxGetLastError(nullptr));
    store->set(keys.id, std::vector<uint8_t>(id.internal, id.internal + CFX_UNIQUE_ID_BYTES));
  } else {
    const std::vector<uint8_t> bytes = store->get(keys.id);
    TORCH_CHECK(bytes.size() == CFX_UNIQUE_ID_BYTES, "conflux: the store holds a unique id of ", bytes.size(),
                " bytes under ", keys.id);
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  const cfxConfig_t cfg = configFor(timeout_, groupName_);
  cfxComm_t comm = nullptr;
  const cfxResult_t r = cfxCommInitRankConfig(&comm, size, id, rank, &cfg);
  if (r != cfxSuccess) {
    C10_THROW_ERROR(DistBackendError, std::string("conflux: joining process group '") + groupName_ + "' failed (" +
                                          cfxGetErrorString(r) + "): " + cfxGetLastError(nullptr));
  }
  start(comm);
}

ProcessGroupConflux::ProcessGroupConflux(cfxComm_t comm, int rank, int size, std::chrono::milliseconds timeout,
                                         std::string groupName, std::vector<uint64_t> globalRanks)
    : Backend(rank, size), handle_(std::make_shared<CommHandle>()), timeout_(timeout),
      groupName_(std::move(groupName)), globalRanks_(std::move(globalRanks)) {
  start(comm);
}

void ProcessGroupConflux::start(cfxComm_t comm) {
  handle_->comm = comm;
  queue_ = std::make_shared<CallQueue>(CallQueue::Batch{[] { cfxGroupStart(); }, [this]() -> std::string {
                                                          const cfxResult_t e = cfxGroupEnd();
                                                          return e == cfxSuccess ? "" : failure("send/recv batch", e);
                                                        }});
  init();
}

ProcessGroupConflux::~ProcessGroupConflux() { shutdown(); }

void ProcessGroupConflux::shutdown() {
  // Queued calls finish first (a failed peer makes them fail within the timeout) and the worker stops,
  // then the communicator goes, with its shared memory and endpoints.
  if (queue_) queue_->stop();
  std::lock_guard<std::mutex> lock(handle_->mutex);
  if (handle_->comm != nullptr) {
    cfxCommDestroy(handle_->comm);
    handle_->comm = nullptr;
  }
}

void ProcessGroupConflux::abort() { handle_->abort(); }

c10d::ErrorType ProcessGroupConflux::getError() {
  std::lock_guard<std::mutex> lock(handle_->mutex);
  if (handle_->comm == nullptr) return c10d::ErrorType::SUCCESS;
  cfxResult_t e = cfxSuccess;
  cfxCommGetAsyncError(handle_->comm, &e);
  switch (e) {
    case cfxSuccess: return c10d::ErrorType::SUCCESS;
    case cfxTimeout: return c10d::ErrorType::TIMEOUT;
    case cfxRemoteError: return c10d::ErrorType::REMOTE_ERROR;
    default: return c10d::ErrorType::COMM_ERROR;
  }
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupConflux::getBackendOptions() {
  auto o = c10::make_intrusive<Options>("conflux", timeout_);
  o->group_name = groupName_;
  o->global_ranks_in_group = globalRanks_;
  return o;
}

std::chrono::milliseconds ProcessGroupConflux::timeoutOf(std::chrono::milliseconds requested) const {
  return requested == c10d::kUnsetTimeout ? timeout_ : requested;
}

std::string ProcessGroupConflux::failure(const char* title, cfxResult_t r, const std::string& message) const {
  std::string msg = std::string("conflux: ") + title + " failed (" + cfxGetErrorString(r) +
                    "): " + (message.empty() ? std::string(cfxGetLastError(nullptr)) : message);
  if (!globalRanks_.empty()) {
    msg += " [ranks are those of process group '" + groupName_ + "', whose global ranks are";
    for (size_t i = 0; i < globalRanks_.size() && i < 64; ++i) msg += (i ? ", " : " ") + std::to_string(globalRanks_[i]);
    msg += globalRanks_.size() > 64 ? ", ...]" : "]";
  }
  return msg;
}

void ProcessGroupConflux::checkPeer(int peer, const char* what) const {
  TORCH_CHECK(peer >= 0 && peer < size_, "conflux: ", what, " ", peer, " is not a rank of this group (size ", size_, ")");
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupConflux::split(const c10::intrusive_ptr<c10d::Store>& /*store*/,
                                                             const std::vector<int>& ranks,
                                                             const c10::intrusive_ptr<Options>& opts) {
  // torch calls split on ranks outside the new group once per device type of the parent (cpu, cuda)
  // but on members once, so a split that needs every parent rank (cfxCommSplit) could not be matched.
  // The members make the new communicator among themselves (cfxCommCreateGroup, meeting through this
  // group's); the others touch nothing.
  const auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me == ranks.end()) return nullptr;
  const std::chrono::milliseconds timeout = opts ? opts->timeout : timeout_;
  const std::string name = opts ? opts->group_name : std::string();
  std::vector<uint64_t> global;
  for (int pr : ranks) {
    TORCH_CHECK(pr >= 0 && pr < size_, "conflux: split: rank ", pr, " is not a rank of the parent group");
    global.push_back(globalRanks_.empty() ? static_cast<uint64_t>(pr) : globalRanks_.at(static_cast<size_t>(pr)));
  }
  TORCH_CHECK(handle_->comm != nullptr, "conflux: split of a process group that was shut down");
  const cfxConfig_t cfg = configFor(timeout, name);
  cfxComm_t comm = nullptr;
  cfxResult_t r = cfxSuccess;
  std::string error;
  // In order with this group's other calls (every member makes the same split at the same point).
  queue_->runInline([&] {
    r = cfxCommCreateGroup(handle_->comm, static_cast<int>(ranks.size()), ranks.data(), &comm, &cfg);
    if (r != cfxSuccess) error = cfxGetLastError(handle_->comm);
  });
  if (r != cfxSuccess) {
    C10_THROW_ERROR(DistBackendError, std::string("conflux: splitting process group '") + groupName_ + "' into '" +
                                          name + "' failed (" + cfxGetErrorString(r) + "): " + error);
  }
  return c10::make_intrusive<ProcessGroupConflux>(comm, static_cast<int>(me - ranks.begin()),
                                                  static_cast<int>(ranks.size()), timeout, name, std::move(global));
}

#if CONFLUX_TORCH_HAS_SHRINK
c10::intrusive_ptr<c10d::Backend> ProcessGroupConflux::shrink(const std::vector<int64_t>& excluded, int flags,
                                                              const c10::intrusive_ptr<Options>& opts) {
  constexpr int kShrinkAbort = 1;  // torch.distributed.SHRINK_ABORT
  std::vector<int> gone;
  for (int64_t r : excluded) {
    TORCH_CHECK(r >= 0 && r < size_, "conflux: shrink: rank ", r, " is not a rank of process group '", groupName_, "'");
    gone.push_back(static_cast<int>(r));
  }
  std::vector<uint64_t> global;
  int newRank = 0;
  for (int r = 0; r < size_; ++r) {
    if (std::find(gone.begin(), gone.end(), r) != gone.end()) continue;
    if (r < rank_) ++newRank;
    global.push_back(globalRanks_.empty() ? static_cast<uint64_t>(r) : globalRanks_.at(static_cast<size_t>(r)));
  }
  const std::chrono::milliseconds timeout = opts ? opts->timeout : timeout_;
  const std::string name = opts && !opts->group_name.empty() ? opts->group_name : groupName_;
  TORCH_CHECK(handle_->comm != nullptr, "conflux: shrink of a process group that was shut down");
  if (flags & kShrinkAbort) handle_->abort();  // queued calls then fail at once, and the queue drains
  const cfxConfig_t cfg = configFor(timeout, name);
  cfxComm_t comm = nullptr;
  cfxResult_t r = cfxSuccess;
  std::string error;
  queue_->runInline([&] {
    r = cfxCommShrink(handle_->comm, gone.data(), static_cast<int>(gone.size()), &comm, &cfg);
    if (r != cfxSuccess) error = cfxGetLastError(handle_->comm);
  });
  if (r != cfxSuccess) {
    C10_THROW_ERROR(DistBackendError, std::string("conflux: shrinking process group '") + groupName_ + "' failed (" +
                                          cfxGetErrorString(r) + "): " + error);
  }
  return c10::make_intrusive<ProcessGroupConflux>(comm, newRank, static_cast<int>(global.size()), timeout, name,
                                                  std::move(global));
}
#endif

void ProcessGroupConflux::performNocolorSplit(at::Device /*device*/) {
  // Members of a new group split from this one meet among themselves (see split): nothing to do here.
}

void ProcessGroupConflux::startCoalescing() {
  TORCH_CHECK(!coalescing_, "conflux: startCoalescing inside a coalescing block");
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::endCoalescing() {
  TORCH_CHECK(coalescing_, "conflux: endCoalescing without startCoalescing");
  coalescing_ = false;
  auto batch = std::make_shared<std::vector<Deferred>>(std::move(coalesced_));
  coalesced_.clear();
  std::vector<at::Tensor> touched, outputs;
  for (const Deferred& d : *batch) {
    touched.insert(touched.end(), d.touched.begin(), d.touched.end());
    const std::vector<at::Tensor> out = d.work->result();
    outputs.insert(outputs.end(), out.begin(), out.end());
  }
  // One Conflux group: its collectives in call order, then its sends and receives together.
  Step step = groupedStep([batch](FirstError& first, cfxStream_t stream) {
    for (const Deferred& d : *batch) first(d.step.issue(stream), d.step.message.get());
  });
  step.before = [batch] {
    for (Deferred& d : *batch) {
      if (d.step.before) d.step.before();
    }
  };
  step.after = [batch] {
    for (Deferred& d : *batch) {
      if (d.step.after) d.step.after();
    }
  };
  step.done = [batch](std::exception_ptr error) {
    for (Deferred& d : *batch) d.work->complete(error);
  };
  try {
    return issue(c10d::OpType::COALESCED, "coalesced calls", touched, std::move(outputs), /*asyncOp=*/true, timeout_,
                 std::move(step));
  } catch (const std::exception& e) {
    // The batch never ran: its calls' works fail with the reason rather than never completing.
    const auto error = ConfluxWork::backendError(std::string("conflux: coalesced calls: ") + e.what());
    for (Deferred& d : *batch) d.work->complete(error);
    throw;
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupConflux::issue(c10d::OpType type, const char* title,
                                                          const std::vector<at::Tensor>& touched,
                                                          std::vector<at::Tensor> outputs, bool asyncOp,
                                                          std::chrono::milliseconds timeout, Step step, bool p2p) {
  TORCH_CHECK(handle_->comm != nullptr, "conflux: ", title, " on a process group that was shut down");
  // Where the call runs: CPU, or one CUDA device for all of its tensors.
  int device = -1;
  bool cuda = false, cpu = false;
  for (const at::Tensor& t : touched) {
    if (!t.defined()) continue;
    if (t.is_cuda()) {
      TORCH_CHECK(!cuda || t.device().index() == device, "conflux: ", title, " has tensors on CUDA devices ", device,
                  " and ", static_cast<int>(t.device().index()), "; one device per call");
      cuda = true;
      device = t.device().index();
    } else {
      cpu = true;
    }
  }
  TORCH_CHECK(!(cuda && cpu), "conflux: ", title, " mixes CPU and CUDA tensors");
#if !CONFLUX_TORCH_CUDA
  TORCH_CHECK(!cuda, "conflux: ", title, " got CUDA tensors, but this conflux_torch was built without CUDA support "
              "(reinstall it where the CUDA toolkit is found)");
#endif
  TORCH_CHECK(!cuda || libraryHasCuda(), "conflux: ", title, " got CUDA tensors, but the Conflux library in use was "
              "built without CUDA (CONFLUX_WITH_CUDA)");
  std::vector<c10::Device> devices;
  if (cuda) devices.emplace_back(c10::kCUDA, static_cast<c10::DeviceIndex>(device));
  const uint64_t seq = ++seq_;
  auto work = c10::make_intrusive<ConfluxWork>(rank_, type, seq, title, std::move(outputs), std::move(devices),
                                               timeoutOf(timeout), [h = handle_] { h->abort(); });
  if (coalescing_) {
    coalesced_.push_back({std::move(step), work, touched});
    return work;
  }
  if (cuda || !asyncOp) {
    queue_->runInline([&] { runStep(work, step, cuda, device, /*deferred=*/false); });
    return work;
  }
  // The caller may drop its tensors as soon as this returns (FSDP2 all-gathers a padded temporary):
  // the queued call holds every tensor it reads or writes until it has run.
  CallQueue::Call call;
  if (!p2p) {
    call.run = [this, work, step = std::move(step), held = touched] {
      runStep(work, step, false, -1, /*deferred=*/true);
    };
    queue_->enqueue(std::move(call));
    return work;
  }
  // A send or receive on the worker: its operation joins the batch of sends and receives queued with it.
  auto ownError = std::make_shared<std::string>();
  call.p2p = true;
  call.run = [this, issueCalls = std::move(step.issue), ownError, title] {
    const cfxResult_t r = issueCalls(nullptr);
    if (r != cfxSuccess) *ownError = failure(title, r);
  };
  call.finish = [work, done = std::move(step.done), ownError, held = touched](const std::string& batchError) {
    const std::string error = ownError->empty() ? batchError : *ownError;
    at::launch([work, done, error] {  // off the worker: see runStep
      const std::exception_ptr e = error.empty() ? nullptr : ConfluxWork::backendError(error);
      work->complete(e);
      if (done) done(e);
    });
  };
  const uint64_t queued = queue_->enqueue(std::move(call));
  work->setOnWait([q = std::weak_ptr<CallQueue>(queue_), queued] {
    if (auto queue = q.lock()) queue->flush(queued);
  });
  return work;
}

void ProcessGroupConflux::runStep(const c10::intrusive_ptr<ConfluxWork>& work, const Step& step, bool cuda,
                                  int device, bool deferred) {
  std::exception_ptr error;
  try {
    cfxStream_t stream = nullptr;
#if CONFLUX_TORCH_CUDA
    std::optional<c10::cuda::CUDAGuard> guard;
    if (cuda) {
      guard.emplace(static_cast<c10::DeviceIndex>(device));
      stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
    }
#else
    (void)cuda, (void)device;
#endif
    if (step.before) step.before();
    const cfxResult_t r = step.issue(stream);
    if (r != cfxSuccess) {
      error = ConfluxWork::backendError(failure(work->title().c_str(), r, step.message ? *step.message : ""));
    } else if (step.after) {
      step.after();
    }
    if (!deferred) {
      // Still under the guard: a CUDA work's future records its events on this stream.
      work->complete(error);
      if (step.done) step.done(error);
      return;
    }
  } catch (const std::exception& e) {
    error = ConfluxWork::backendError(std::string("conflux: ") + work->title() + ": " + e.what());
    if (!deferred) {
      if (!work->isCompleted()) work->complete(error);
      if (step.done) step.done(error);
      return;
    }
  }
  // On the worker: the future's callbacks (DDP comm hooks, then() chains) run on torch's inter-op pool,
  // where they may make further calls on this group and wait for them without blocking the worker.
  at::launch([work, done = step.done, error] {
    work->complete(error);
    if (done) done(error);
  });
}

}  // namespace conflux_torch
