// conflux::transport: what the executor needs from a transport that carries whole messages between ranks.
//
// A MessageTransport posts a send or a receive of one message (a buffer, its size, a peer and a tag) and
// hands back a Request that completes when the bytes have left (send) or arrived (receive). Messages
// between one pair with equal tags match in the order both sides posted them; send and receive sizes
// must match. progress() moves posted messages without blocking; poll() may also block until something
// could have completed or a deadline passes, so that a waiting rank does not burn its core. The executor
// (src/executor.h) drives one per communicator for the peers on other nodes and knows nothing else
// of the transport behind it: the networks of transport/network.h in the library (libfabric, tcp),
// in-memory fakes that delay, reorder and fail messages in tests (tests/unit/fake_transport.h).
//
// Tags are 24 bits (kMaxTag); the executor's two layouts are below.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"

namespace conflux::transport {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

/// What one posted message's Request sees. A transport derives its operation state from it and sets
/// `status` before it sets `failed` or `done` (release), so a reader that sees either sees the status.
struct RequestState {
  std::atomic<bool> done{false};    ///< finished: every byte moved, or failed with nothing left in flight
  std::atomic<bool> failed{false};  ///< an error ended it (`status`); it may still be in flight until done
  Status status;
  size_t bytes = 0;                 ///< the message's size
  /// Bytes of the message moved so far, where the transport can tell (a chunk or a socket read at a time;
  /// 0 until done where it cannot). A waiting caller counts a change as progress, so that a message slower
  /// than the caller's no-progress timeout, on a slow but alive link, is not taken for a stuck one.
  std::atomic<uint64_t> movedBytes{0};
};

/// One posted send or receive. Cheap to copy (shared state); its buffer stays in use until done().
class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<RequestState> state) : state_(std::move(state)) {}
  bool valid() const { return state_ != nullptr; }
  /// True once the message moved or the operation failed (updated by the transport's progress).
  bool done() const { return state_ == nullptr || state_->done.load(std::memory_order_acquire); }
  /// True once the operation failed (it may be in flight until done()).
  bool failed() const { return state_ != nullptr && state_->failed.load(std::memory_order_acquire); }
  /// Ok, the error that ended it (naming the peer and the operation), or InProgress.
  Status status() const {
    if (state_ == nullptr) return Status(Code::InvalidUsage, "empty request");
    return done() || failed() ? state_->status : Status(Code::InProgress, "request in progress");
  }
  size_t bytes() const { return state_ ? state_->bytes : 0; }
  /// Bytes moved so far (RequestState::movedBytes).
  uint64_t movedBytes() const { return state_ ? state_->movedBytes.load(std::memory_order_relaxed) : 0; }
  /// The transport's state of this operation.
  RequestState* state() const { return state_.get(); }

 private:
  std::shared_ptr<RequestState> state_;
};

class MessageTransport {
 public:
  /// The largest tag a caller may pass.
  static constexpr uint64_t kMaxTag = (uint64_t{1} << 24) - 1;

  virtual ~MessageTransport() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  /// Starts sending `bytes` from `buf` to `peer` with `tag` (<= kMaxTag). Errors (a bad peer or tag, a
  /// broken link) come back through the request.
  virtual Request isend(int peer, uint64_t tag, const void* buf, size_t bytes) = 0;
  /// Starts receiving exactly `bytes` into `buf` from `peer` with `tag`.
  virtual Request irecv(int peer, uint64_t tag, void* buf, size_t bytes) = 0;
  /// Moves posted messages along without blocking.
  virtual void progress() = 0;
  /// Progresses, and may block until a message could have completed or `until` passes (briefly: callers
  /// check their requests, their other peers and their deadlines after each poll).
  virtual void poll(Deadline until) = 0;
  /// The caller is about to free [ptr, ptr+bytes) (no operation of it is posted): a transport that keeps
  /// registrations of memory it carried drops those covering it, so that new memory at the same
  /// addresses is not sent or received through stale ones. Default: nothing to drop.
  virtual void forget(const void* ptr, size_t bytes) {
    (void)ptr;
    (void)bytes;
  }
  /// A count that grows while bytes move on the connection with `peer`, either way, below the requests:
  /// bytes read from it, and bytes handed to the operating system earlier that the peer's host has since
  /// acknowledged. A caller whose requests show no movement counts a change as progress: on a slow link
  /// the bytes of a send that completed into the kernel's buffer may still be on their way to a peer the
  /// caller now waits for. 0 (the default) where the transport cannot tell.
  virtual uint64_t linkActivity(int peer) {
    (void)peer;
    return 0;
  }
  /// Progress across nodes, for the no-progress timeout: a rank that waits for a rank on another node,
  /// which itself waits (for a slow link further on, say), sees none of that rank's progress unless it is
  /// told. This rank, in collective call `seq`, last progressed `ageNs` ago, which it learnt through
  /// `hops` notices (0: its own progress or its node's): a best-effort notice to rank `peer`, dropped
  /// while the previous one to it is still under way. The age, not a time, travels (node clocks differ);
  /// each notice is read a little after it was sent, so the progress a chain carries looks newer by that
  /// delay at every notice, and the hop count bounds how far: the executor passes on nothing that came
  /// through kMaxProgressHops notices, so ranks that wait for each other in a cycle still time out.
  /// Default: nothing.
  virtual void tellProgress(int peer, uint64_t seq, int64_t ageNs, uint32_t hops) {
    (void)peer;
    (void)seq;
    (void)ageNs;
    (void)hops;
  }
  /// What rank `peer` last told of its progress in call `seq` or an earlier one (which it must finish
  /// before it gets to `seq`): the time (the notice's arrival less its age, on this rank's steady clock in
  /// ns; 0 when nothing was heard for those calls) and the notice's hop count.
  struct HeardProgress {
    int64_t ns = 0;
    uint32_t hops = 0;
  };
  virtual HeardProgress heardProgress(int peer, uint64_t seq) {
    (void)peer;
    (void)seq;
    return {};
  }
  /// Notices a progress time may pass through before it is passed on no more (tellProgress).
  static constexpr uint32_t kMaxProgressHops = 8;
  /// A failure this transport learnt of outside the caller's requests (a peer's failure notice,
  /// Network::announceFailure), which no posted request may ever report; ok otherwise. A caller whose
  /// requests make no progress looks here; once not ok it stays so. Default: nothing learnt.
  virtual Status failure() { return Status::ok(); }
};

/// What a transport keeps of one peer's progress notices (MessageTransport::tellProgress): a notice of a
/// later call, or of a later time in the same call, replaces what it kept; it answers for that call and
/// later ones (the peer must finish a call before it gets to the next).
class ToldProgress {
 public:
  /// A notice of call `seq`, read at `readNs` (steady clock), saying the peer progressed `ageNs` ago
  /// through `hops` notices. The age is clamped to [0, readNs].
  void keep(uint64_t seq, int64_t ageNs, uint32_t hops, int64_t readNs) {
    const int64_t at = readNs - std::clamp<int64_t>(ageNs, 0, readNs);
    if (seq > seq_ || (seq == seq_ && at > heard_.ns)) {
      seq_ = seq;
      heard_ = MessageTransport::HeardProgress{at, hops};
    }
  }
  /// What it kept, for call `seq` (none when it kept nothing, or only of a later call).
  MessageTransport::HeardProgress forCall(uint64_t seq) const {
    return seq_ != 0 && seq_ <= seq ? heard_ : MessageTransport::HeardProgress{};
  }
  /// The steady clock now, in ns (what `readNs` is on).
  static int64_t nowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  }

 private:
  uint64_t seq_ = 0;
  MessageTransport::HeardProgress heard_;
};

/// Waits until every request is done, progressing `net` (spinning for the first 50 us, then polling);
/// the first failure, or Timeout (naming `what` and how many are still pending) at `until`.
Status waitAll(MessageTransport& net, std::span<Request> requests, Deadline until, const std::string& what);

/// All-gather of equal-sized blobs: takes this rank's, returns every rank's concatenated in rank order.
/// The bootstrap provides it at set-up, before any transport exists.
using BlobAllGather = std::function<std::vector<uint8_t>(const std::vector<uint8_t>&)>;

/// Every rank's `mine`, in rank order, through one all-gather (collective).
template <class T>
std::vector<T> allGatherValues(const BlobAllGather& allGather, const T& mine) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<uint8_t> blob(sizeof(T));
  std::memcpy(blob.data(), &mine, sizeof(T));
  const std::vector<uint8_t> all = allGather(blob);
  std::vector<T> out(all.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), all.data(), out.size() * sizeof(T));
  return out;
}

/// A collective's message: its number among the call's messages with that peer in that direction (low 11
/// bits kept) and the call's number (1..4095, counting on from 1 after 4095). Bit 23 stays clear: it marks
/// point-to-point. Call 0 is the set-up's and the transports' own: the cost probe's messages (src/
/// cost_probe.cc) and the failure notices (kFailureNoticeTag) are the only ones that use it.
constexpr uint64_t collectiveTag(uint32_t message, uint32_t call) {
  const uint32_t callBits = call == 0 ? 0 : 1 + (call - 1) % 0xfffu;
  return (uint64_t(message & 0x7ffu) << 12) | callBits;
}

/// The tag of a failure notice, for transports that carry notices as messages (transport/ofi): message
/// 0x7ff of call 0, which no call's messages and no probe's use.
inline constexpr uint64_t kFailureNoticeTag = collectiveTag(0x7ff, 0);

inline constexpr uint64_t kP2pTagBit = uint64_t{1} << 23;
/// A point-to-point message: bit 23, then its number among all point-to-point messages between the pair in
/// that direction (low 23 bits kept), so that sends and receives match in order across calls and groups.
constexpr uint64_t p2pTag(uint64_t message) { return kP2pTagBit | (message & (kP2pTagBit - 1)); }

}  // namespace conflux::transport
