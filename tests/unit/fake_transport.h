// An in-memory transport::MessageTransport for tests: the ranks are threads of one process sharing a
// FakeFabric. It keeps the real contract (messages between a pair with equal tags match in post order;
// send and receive sizes must match; a bad peer or tag fails the request) and adds what a real network
// does to the caller's schedule, under a seed:
//   - delays: a send completes, and a matched receive completes, only after a random number (up to
//     `maxDelay`) of its owner's progress calls; a send's bytes are copied when it is posted (as an eager
//     protocol does), so it may complete before the receiver posts;
//   - reordering: completions come in the order their delays run out, not in post order;
//   - failures: the `failAt`-th operation posted by rank `failRank` fails with RemoteError instead of
//     being delivered, and its peer never sees the message;
//   - a slow link: every message takes `deliveryMs` of wall time once matched (a send: once posted), its
//     bytes moving evenly over it (RequestState::movedBytes), or, `countsBytes` off, seen only whole at
//     the end, as a transport that cannot tell;
//   - a link of finite bandwidth (`linkBytesPerMs`): each rank's sends leave one after another at that
//     rate, and a message arrives `deliveryMs` (its latency) after its last byte left; a receive
//     completes when its message has arrived.
// poll() sleeps on a condition variable that every post and match notifies.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "transport/transport.h"

namespace faketransport {

using conflux::Code;
using conflux::Status;
namespace transport = conflux::transport;

struct Faults {
  uint32_t seed = 1;
  int maxDelay = 0;      ///< progress calls before a message completes: uniform in [0, maxDelay]
  int failRank = -1;     ///< rank whose operation fails (-1: none)
  uint64_t failAt = 0;   ///< 1-based number of that rank's posted operation that fails
  int deliveryMs = 0;    ///< wall time every message takes to move (0: none)
  bool countsBytes = true;  ///< movedBytes grows while a slow message moves (false: 0 until it completes)
  double linkBytesPerMs = 0;  ///< each rank's outgoing link, sends in turn (0: unlimited; deliveryMs then counts from the match)
  int slowRank = -1;      ///< with deliveryMs: only messages to or from this rank are slow (-1: every message)
  bool tellsProgress = true;  ///< progress notices (tellProgress) arrive (false: they are lost)
  int noticeDelayMs = 0;      ///< a progress notice is read this long after it was sent (0: at once)
  int forgedNoticeHops = -1;  ///< >= 0: every peer always tells it progressed just now, through this many hops
};

class FakeFabric {
 public:
  FakeFabric(int nranks, Faults faults)
      : nranks_(nranks), faults_(faults), rng_(faults.seed), inflight_(size_t(nranks)), posted_(size_t(nranks), 0),
        linkFree_(size_t(nranks)) {}

  class Endpoint;
  /// Rank `rank`'s transport; the fabric must outlive it.
  std::unique_ptr<transport::MessageTransport> endpoint(int rank);

  /// Messages posted and not yet received (for checking that a run consumed everything).
  size_t unmatched() {
    std::lock_guard lock(mutex_);
    size_t n = 0;
    for (const auto& [key, q] : sends_) n += q.size();
    for (const auto& [key, q] : recvs_) n += q.size();
    return n;
  }

 private:
  struct Op : transport::RequestState {
    int owner = 0;
    int peer = 0;
    int countdown = 0;
    transport::Clock::time_point scheduled{};
    transport::Clock::time_point due{};  ///< when it completes (slow or rate-limited links)
    std::vector<std::byte> payload;  ///< a send's bytes, copied at post
    void* dst = nullptr;             ///< a receive's buffer
  };
  using Key = std::tuple<int, int, uint64_t>;  ///< (source, destination, tag)

  transport::Request post(int self, bool send, int peer, uint64_t tag, const void* src, void* dst, size_t bytes) {
    auto op = std::make_shared<Op>();
    op->owner = self;
    op->peer = peer;
    op->bytes = bytes;
    std::lock_guard lock(mutex_);
    const uint64_t number = ++posted_[size_t(self)];
    const std::string what = std::string(send ? "send to" : "receive from") + " rank " + std::to_string(peer) +
                             " (tag " + std::to_string(tag) + ", " + std::to_string(bytes) + " bytes)";
    if (peer < 0 || peer >= nranks_ || tag > transport::MessageTransport::kMaxTag || (bytes > 0 && !src && !dst)) {
      finish(*op, Status(Code::InvalidArgument, "fake transport: invalid " + what));
      return transport::Request(op);
    }
    if (self == faults_.failRank && number == faults_.failAt) {
      op->status = Status(Code::RemoteError, "fake transport: injected failure of rank " + std::to_string(self) +
                                                 "'s operation " + std::to_string(number) + ", a " + what);
      schedule(op);  // fails once its delay runs out; the peer never sees the message
      cv_.notify_all();
      return transport::Request(op);
    }
    const Key key = send ? Key{self, peer, tag} : Key{peer, self, tag};
    if (send) {
      op->payload.assign(static_cast<const std::byte*>(src), static_cast<const std::byte*>(src) + bytes);
      schedule(op);
      if (faults_.linkBytesPerMs > 0) {  // it leaves when the link is free, and arrives a latency later
        auto& free = linkFree_[size_t(self)];
        free = std::max(free, op->scheduled) + std::chrono::duration_cast<transport::Clock::duration>(
                                                  std::chrono::duration<double, std::milli>(double(bytes) / faults_.linkBytesPerMs));
        op->due = free + std::chrono::milliseconds(faults_.deliveryMs);
      }
      auto& waiting = recvs_[key];
      if (!waiting.empty()) {
        deliver(*op, *waiting.front());
        schedule(waiting.front(), op.get());
        waiting.pop_front();
      } else {
        sends_[key].push_back(op);
      }
    } else {
      op->dst = dst;
      auto& waiting = sends_[key];
      if (!waiting.empty()) {
        deliver(*waiting.front(), *op);
        schedule(op, waiting.front().get());
        waiting.pop_front();
      } else {
        recvs_[key].push_back(op);
      }
    }
    cv_.notify_all();
    return transport::Request(op);
  }

  // Under mutex_: copies a send's payload into the receive (or records the size mismatch).
  static void deliver(const Op& send, Op& recv) {
    if (send.bytes != recv.bytes) {
      recv.status = Status(Code::InvalidUsage, "fake transport: a send of " + std::to_string(send.bytes) +
                                                   " bytes matched a receive of " + std::to_string(recv.bytes));
      return;
    }
    if (send.bytes > 0) std::memcpy(recv.dst, send.payload.data(), send.bytes);
  }
  /// Starts op's delay; a receive matched with `sent` completes no earlier than that send's arrival.
  void schedule(const std::shared_ptr<Op>& op, const Op* sent = nullptr) {
    op->countdown = faults_.maxDelay > 0 ? std::uniform_int_distribution<int>(0, faults_.maxDelay)(rng_) : 0;
    op->scheduled = transport::Clock::now();
    const bool slow = faults_.slowRank < 0 || op->owner == faults_.slowRank || op->peer == faults_.slowRank;
    op->due = op->scheduled + std::chrono::milliseconds(slow ? faults_.deliveryMs : 0);
    if (sent != nullptr && faults_.linkBytesPerMs > 0) op->due = std::max(op->scheduled, sent->due);
    inflight_[size_t(op->owner)].push_back(op);
  }
  static void finish(Op& op, Status s) {
    const bool bad = !s.isOk();
    op.status = std::move(s);
    if (bad) op.failed.store(true, std::memory_order_release);
    op.done.store(true, std::memory_order_release);
  }

  /// How far a slow message has moved (0..1), 1 when the link is not slow.
  double movedFraction(const Op& op, transport::Clock::time_point now) const {
    if (op.due <= op.scheduled) return 1.0;
    return std::min(1.0, std::chrono::duration<double>(now - op.scheduled) / (op.due - op.scheduled));
  }

  void progress(int self) {
    std::lock_guard lock(mutex_);
    const auto now = transport::Clock::now();
    auto& mine = inflight_[size_t(self)];
    for (auto it = mine.begin(); it != mine.end();) {
      Op& op = **it;
      if (op.countdown-- > 0) {
        ++it;
        continue;
      }
      if (const double f = movedFraction(op, now); f < 1.0) {
        if (faults_.countsBytes) op.movedBytes.store(uint64_t(double(op.bytes) * f), std::memory_order_relaxed);
        ++it;
        continue;
      }
      op.movedBytes.store(op.bytes, std::memory_order_relaxed);
      finish(op, op.status);
      it = mine.erase(it);
    }
  }

  void poll(int self, transport::Deadline until) {
    progress(self);
    std::unique_lock lock(mutex_);
    // Completions are due (or progress calls count them down): let the caller progress. Slow messages
    // still moving are not due: sleep a moment.
    const auto now = transport::Clock::now();
    for (const auto& op : inflight_[size_t(self)]) {
      if (op->countdown > 0 || movedFraction(*op, now) >= 1.0) return;
    }
    cv_.wait_until(lock, std::min(until, now + std::chrono::milliseconds(1)));
  }

  /// A progress notice from `self` to `peer`, read noticeDelayMs later: then its time is that moment less
  /// the age, as a real receiver computes it.
  void tell(int self, int peer, uint64_t seq, int64_t ageNs, uint32_t hops) {
    if (!faults_.tellsProgress || peer < 0 || peer >= nranks_) return;
    std::lock_guard lock(mutex_);
    const int64_t readAt = transport::ToldProgress::nowNs() + int64_t(faults_.noticeDelayMs) * 1000000;
    notices_[{peer, self}].push_back(Notice{readAt, seq, ageNs, hops});
  }
  transport::MessageTransport::HeardProgress heard(int self, int peer, uint64_t seq) {
    const int64_t now = transport::ToldProgress::nowNs();
    if (faults_.forgedNoticeHops >= 0) return {now, uint32_t(faults_.forgedNoticeHops)};
    std::lock_guard lock(mutex_);
    transport::ToldProgress& h = heard_[{self, peer}];
    auto& queue = notices_[{self, peer}];
    while (!queue.empty() && queue.front().readAt <= now) {
      const Notice& n = queue.front();
      h.keep(n.seq, n.ageNs, n.hops, n.readAt);
      queue.pop_front();
    }
    return h.forCall(seq);
  }

  const int nranks_;
  const Faults faults_;
  struct Notice {
    int64_t readAt;
    uint64_t seq;
    int64_t ageNs;
    uint32_t hops;
  };
  std::map<std::pair<int, int>, std::deque<Notice>> notices_;           ///< (to, from): sent, not read yet
  std::map<std::pair<int, int>, transport::ToldProgress> heard_;        ///< (to, from): what was read
  std::mutex mutex_;
  std::condition_variable cv_;
  std::mt19937 rng_;
  std::map<Key, std::deque<std::shared_ptr<Op>>> sends_, recvs_;  ///< unmatched, in post order
  std::vector<std::vector<std::shared_ptr<Op>>> inflight_;         ///< by owner: waiting for their delay
  std::vector<uint64_t> posted_;                                   ///< operations posted, by rank
  std::vector<transport::Clock::time_point> linkFree_;             ///< by rank: when its outgoing link is idle
};

class FakeFabric::Endpoint : public transport::MessageTransport {
 public:
  Endpoint(FakeFabric& fabric, int rank) : fabric_(fabric), rank_(rank) {}
  int rank() const override { return rank_; }
  int nranks() const override { return fabric_.nranks_; }
  transport::Request isend(int peer, uint64_t tag, const void* buf, size_t bytes) override {
    return fabric_.post(rank_, true, peer, tag, buf, nullptr, bytes);
  }
  transport::Request irecv(int peer, uint64_t tag, void* buf, size_t bytes) override {
    return fabric_.post(rank_, false, peer, tag, nullptr, buf, bytes);
  }
  void progress() override { fabric_.progress(rank_); }
  void poll(transport::Deadline until) override { fabric_.poll(rank_, until); }
  void tellProgress(int peer, uint64_t seq, int64_t ageNs, uint32_t hops) override {
    fabric_.tell(rank_, peer, seq, ageNs, hops);
  }
  HeardProgress heardProgress(int peer, uint64_t seq) override { return fabric_.heard(rank_, peer, seq); }

 private:
  FakeFabric& fabric_;
  int rank_;
};

inline std::unique_ptr<transport::MessageTransport> FakeFabric::endpoint(int rank) {
  return std::make_unique<Endpoint>(*this, rank);
}

}  // namespace faketransport
