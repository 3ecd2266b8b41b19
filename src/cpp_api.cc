// The C++ API (conflux.hpp) over the C API: RAII, ordered asynchronous calls on a per-communicator worker.
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "conflux/conflux.hpp"

namespace conflux {

// ---- Request ----

struct Request::State {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  cfxResult_t result = cfxSuccess;
  std::string message;

  void complete(cfxResult_t r) {
    std::lock_guard<std::mutex> lock(mutex);
    result = r;
    if (r != cfxSuccess) message = cfxGetLastError(nullptr);
    done = true;
    cv.notify_all();
  }
};

Request::Request() = default;
Request::~Request() = default;
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&&) noexcept = default;
Request::Request(std::shared_ptr<State> s) : state_(std::move(s)) {}

void Request::wait() {
  if (!state_) return;
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->cv.wait(lock, [&] { return state_->done; });
  if (state_->result != cfxSuccess) throw Exception(state_->result, state_->message);
}

bool Request::test() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done;
}

// ---- UniqueId ----

UniqueId UniqueId::create() {
  UniqueId id;
  check(cfxGetUniqueId(&id.id_));
  return id;
}

UniqueId UniqueId::fromBytes(const std::array<char, CFX_UNIQUE_ID_BYTES>& bytes) {
  UniqueId id;
  std::memcpy(id.id_.internal, bytes.data(), bytes.size());
  return id;
}

std::array<char, CFX_UNIQUE_ID_BYTES> UniqueId::bytes() const {
  std::array<char, CFX_UNIQUE_ID_BYTES> out;
  std::memcpy(out.data(), id_.internal, out.size());
  return out;
}

// ---- Communicator ----

// Calls run in issue order. Until the first asynchronous call they run on the caller's thread; after it,
// every call goes through the worker so that a synchronous call cannot overtake a queued one.
struct Communicator::Impl {
  cfxComm_t comm = nullptr;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  std::thread worker;
  bool stopping = false;

  ~Impl() {
    if (worker.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        stopping = true;
      }
      cv.notify_all();
      worker.join();
    }
    if (comm != nullptr) cfxCommDestroy(comm);
  }

  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        job = std::move(queue.front());
        queue.pop_front();
      }
      job();
    }
  }

  Request submit(std::function<cfxResult_t()> fn, bool async) {
    auto state = std::make_shared<Request::State>();
    if (!async && !worker.joinable()) {
      state->complete(fn());
      return Request(state);
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!worker.joinable()) worker = std::thread([this] { loop(); });
      queue.push_back([state, fn = std::move(fn)] { state->complete(fn()); });
    }
    cv.notify_all();
    return Request(state);
  }
};

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Communicator::Communicator(int nranks, const UniqueId& id, int rank) : impl_(std::make_unique<Impl>()) {
  check(cfxCommInitRank(&impl_->comm, nranks, id.raw(), rank));
}

namespace {
cfxConfig_t toCfxConfig(const Config& config) {
  cfxConfig_t c = CFX_CONFIG_INITIALIZER;
  if (config.timeoutMs != 0) c.timeoutMs = config.timeoutMs;
  if (!config.name.empty()) c.commName = config.name.c_str();
  c.splitShare = config.splitShare ? 1 : 0;
  return c;
}
}  // namespace

Communicator::Communicator(int nranks, const UniqueId& id, int rank, const Config& config)
    : impl_(std::make_unique<Impl>()) {
  const cfxConfig_t c = toCfxConfig(config);
  check(cfxCommInitRankConfig(&impl_->comm, nranks, id.raw(), rank, &c));
}

std::optional<Communicator> Communicator::split(int color, int key, const Config& config) {
  const cfxConfig_t c = toCfxConfig(config);
  auto impl = std::make_unique<Impl>();
  // In issue order with this communicator's asynchronous calls.
  impl_->submit([&] { return cfxCommSplit(impl_->comm, color < 0 ? CFX_SPLIT_NOCOLOR : color, key, &impl->comm, &c); },
                false)
      .wait();
  if (impl->comm == nullptr) return std::nullopt;
  return Communicator(std::move(impl));
}

Communicator Communicator::createGroup(std::span<const int> ranks, const Config& config) {
  const cfxConfig_t c = toCfxConfig(config);
  auto impl = std::make_unique<Impl>();
  // In issue order with this communicator's asynchronous calls.
  impl_->submit([&] { return cfxCommCreateGroup(impl_->comm, static_cast<int>(ranks.size()), ranks.data(), &impl->comm, &c); },
                false)
      .wait();
  return Communicator(std::move(impl));
}

Communicator Communicator::shrink(std::span<const int> excludeRanks, const Config& config) {
  const cfxConfig_t c = toCfxConfig(config);
  auto impl = std::make_unique<Impl>();
  // In issue order with this communicator's asynchronous calls (which fail at once after an error).
  impl_->submit([&] {
    return cfxCommShrink(impl_->comm, excludeRanks.data(), static_cast<int>(excludeRanks.size()), &impl->comm, &c);
  }, false).wait();
  return Communicator(std::move(impl));
}

void Communicator::ordered(const std::function<cfxResult_t(cfxComm_t)>& fn) {
  cfxComm_t c = impl_->comm;
  impl_->submit([&fn, c] { return fn(c); }, false).wait();
}

void Communicator::releaseOpInOrder(cfxRedOp_t op) noexcept {
  cfxComm_t c = impl_->comm;
  try {
    // Queued behind the calls that may use it when there is a worker, else run now (not waited for).
    impl_->submit([c, op] { return cfxRedOpDestroy(op, c); }, false);
  } catch (...) {
    cfxRedOpDestroy(op, c);  // could not queue (out of memory): release now
  }
}

Communicator Communicator::fromEnvironment() {
  auto impl = std::make_unique<Impl>();
  check(cfxCommInitFromEnv(&impl->comm));
  return Communicator(std::move(impl));
}

Communicator::~Communicator() = default;
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;

int Communicator::rank() const {
  int r = 0;
  check(cfxCommUserRank(impl_->comm, &r));
  return r;
}

int Communicator::size() const {
  int n = 0;
  check(cfxCommCount(impl_->comm, &n));
  return n;
}

int Communicator::localRank() const {
  int r = 0, n = 0;
  check(cfxCommLocalRank(impl_->comm, &r, &n));
  return r;
}

int Communicator::localSize() const {
  int r = 0, n = 0;
  check(cfxCommLocalRank(impl_->comm, &r, &n));
  return n;
}

cfxComm_t Communicator::native() const { return impl_->comm; }

void Communicator::abort() { check(cfxCommAbort(impl_->comm)); }

Request Communicator::call(Kind kind, const void* send, void* recv, size_t count, cfxDataType_t type,
                           cfxRedOp_t op, int rootOrPeer, bool async) {
  cfxComm_t c = impl_->comm;
  auto fn = [=]() -> cfxResult_t {
    switch (kind) {
      case Kind::AllReduce: return cfxAllReduce(send, recv, count, type, op, c, nullptr);
      case Kind::Reduce: return cfxReduce(send, recv, count, type, op, rootOrPeer, c, nullptr);
      case Kind::Broadcast: return cfxBroadcast(send, recv, count, type, rootOrPeer, c, nullptr);
      case Kind::AllGather: return cfxAllGather(send, recv, count, type, c, nullptr);
      case Kind::ReduceScatter: return cfxReduceScatter(send, recv, count, type, op, c, nullptr);
      case Kind::AllToAll: return cfxAllToAll(send, recv, count, type, c, nullptr);
      case Kind::Send: return cfxSend(send, count, type, rootOrPeer, c, nullptr);
      case Kind::Recv: return cfxRecv(recv, count, type, rootOrPeer, c, nullptr);
    }
    return cfxInternalError;
  };
  return impl_->submit(fn, async);
}

void Communicator::sendRecvBytes(const void* out, size_t outCount, int peer, void* in, size_t inCount, int peer2,
                                 cfxDataType_t type) {
  cfxComm_t c = impl_->comm;
  impl_->submit(
           [=]() -> cfxResult_t {
             cfxResult_t r = cfxGroupStart();
             if (r != cfxSuccess) return r;
             cfxResult_t s1 = cfxSend(out, outCount, type, peer, c, nullptr);
             cfxResult_t s2 = cfxRecv(in, inCount, type, peer2, c, nullptr);
             cfxResult_t e = cfxGroupEnd();
             return s1 != cfxSuccess ? s1 : s2 != cfxSuccess ? s2 : e;
           },
           false)
      .wait();
}

}  // namespace conflux
