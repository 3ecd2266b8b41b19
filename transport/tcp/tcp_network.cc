// The tcp transport's messages: per peer, a queue of sends, the receives posted and not yet matched, the
// messages that arrived before their receive, and the message being read (tcp_network.h).
#include "transport/tcp/tcp_network.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <new>
#include <list>

#include "core/copy_bytes.h"
#include "core/log.h"
#include "transport/tcp/tcp_connect.h"
#include "transport/tcp/tcp_wire.h"

namespace conflux::tcp {
namespace {

using transport::Deadline;
using HeardProgress = transport::MessageTransport::HeardProgress;
using transport::Request;
using transport::RequestState;

using wire::Header;
using wire::kMaxNoticeBytes;
using wire::kNoticeBit;
using wire::kProgressBit;
using wire::ProgressNotice;

struct Op : RequestState {
  uint64_t tag = 0;          // kNoticeBit: a failure notice, whose text is in `owned`
  std::byte* buf = nullptr;  // a send's source (read only) or a receive's destination
  std::vector<std::byte> owned;  // a send's own copy of its payload, when buf points into it
  size_t sent = 0;           // a send's payload bytes moved (published in movedBytes)
  size_t headerSent = 0;     // a send's header bytes moved
  int64_t queuedNs = 0;      // a progress notice: when it was queued (its age grows until it leaves)
};

uint64_t physicalBytes() {
  static const uint64_t bytes = uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGESIZE));
  return bytes;
}

bool isNotice(const Header& h) { return (h.tag & kNoticeBit) != 0; }
bool isProgress(const Header& h) { return (h.tag & kProgressBit) != 0 && !isNotice(h); }

void finish(Op& op, const Status& s) {
  op.status = s;
  if (s) op.movedBytes.store(op.bytes, std::memory_order_relaxed);  // also a receive copied from a kept message
  if (!s) op.failed.store(true, std::memory_order_release);
  op.done.store(true, std::memory_order_release);
}

/// A message that arrived before a receive asked for it.
struct Unexpected {
  uint64_t tag = 0;
  std::vector<std::byte> data;
  size_t received = 0;
  std::shared_ptr<Op> claimedBy;  // a receive posted while it was still arriving
};

struct Peer {
  Fd fd;
  std::string name;  // "rank 3"
  bool broken = false;
  Status error;
  std::deque<std::shared_ptr<Op>> sends;
  std::list<std::shared_ptr<Op>> posted;  // receives, in posting order, not matched yet
  std::list<Unexpected> unexpected;       // in arrival order
  // The message being read: its header (headerGot bytes of it so far), then its payload into `into`
  // (a matched receive), or `stash` (unexpected), or nowhere (a size mismatch: read and dropped).
  Header header{};
  size_t headerGot = 0;
  std::shared_ptr<Op> into;
  Unexpected* stash = nullptr;
  size_t payloadGot = 0;
  std::vector<std::byte> sink;
  std::string notice;     // a failure notice being read
  bool announced = false;  // a failure notice was queued to it
  uint64_t written = 0;    // bytes handed to the socket, headers included (linkActivity)
  uint64_t read = 0;       // bytes read from the socket
  // Progress notices (tellProgress): the one being sent, the one being read, the latest heard, and
  // their bytes, which linkActivity leaves out (else ranks that wait for each other would keep each
  // other's timers running with notices alone).
  std::shared_ptr<Op> told;
  ProgressNotice progressIn{};
  transport::ToldProgress heard;
  uint64_t controlWritten = 0, controlRead = 0;
  uint64_t activity = 0;   // the largest linkActivity reported (it never goes back)
};

class TcpNetwork final : public transport::Network {
 public:
  TcpNetwork(const transport::NetOpenArgs& args, Connections c) : rank_(args.rank), nranks_(args.nranks) {
    listenAddress_ = c.listenAddress;
    peers_.resize(c.peers.size());
    for (size_t r = 0; r < c.peers.size(); ++r) {
      peers_[r].fd = std::move(c.peers[r]);
      peers_[r].name = "rank " + std::to_string(r);
      if (peers_[r].fd.get() >= 0) ++connected_;
    }
  }
  ~TcpNetwork() override {
    closeAll();  // nothing moves into kept_ after this
  }

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  Request isend(int peer, uint64_t tag, const void* buf, size_t bytes) override {
    auto op = newOp(tag, const_cast<std::byte*>(static_cast<const std::byte*>(buf)), bytes);
    if (Peer* p = usable(peer, tag, *op)) {
      p->sends.push_back(op);
      flush(*p);
    }
    return Request(op);
  }

  Request irecv(int peer, uint64_t tag, void* buf, size_t bytes) override {
    auto op = newOp(tag, static_cast<std::byte*>(buf), bytes);
    // Messages that arrived before the peer closed can still be received.
    if (Peer* p = usable(peer, tag, *op, /*evenBroken=*/true)) {
      if (matchUnexpected(*p, op)) return Request(op);
      if (p->broken) {
        finish(*op, p->error);
        return Request(op);
      }
      p->posted.push_back(op);
      readAll(*p);
    }
    return Request(op);
  }

  void progress() override {
    for (Peer& p : peers_) {
      if (p.fd.get() < 0 || p.broken) continue;
      flush(p);
      readAll(p);
    }
  }

  void poll(Deadline until) override {
    progress();
    fds_.clear();
    for (Peer& p : peers_) {
      if (p.fd.get() < 0 || p.broken) continue;
      fds_.push_back(pollfd{p.fd.get(), static_cast<short>(POLLIN | (p.sends.empty() ? 0 : POLLOUT)), 0});
    }
    // ppoll: the executor waits in slices of 50 us to 1 ms, which poll's milliseconds would round to a spin.
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(until - transport::Clock::now()).count();
    if (left <= 0) return;
    const long long ns = std::min<long long>(left, 1000000000LL);
    const timespec ts{static_cast<time_t>(ns / 1000000000LL), static_cast<long>(ns % 1000000000LL)};
    // With every connection gone nothing can complete here: sleep anyway (ppoll of no descriptors), so
    // that a caller waiting for its deadline does not spin.
    if (::ppoll(fds_.data(), fds_.size(), &ts, nullptr) > 0) progress();
  }

  void announceFailure(const Status& status) override {
    for (Peer& p : peers_) {
      if (p.fd.get() < 0 || p.broken) continue;
      // Sends not started belong to the failed call: they fail, and the notice follows the one that is
      // partly on the wire (its bytes must complete for the peer to read the notice).
      const bool started = !p.sends.empty() && (p.sends.front()->headerSent > 0);
      while (p.sends.size() > (started ? 1u : 0u)) {
        finish(*p.sends.back(), status);
        p.sends.pop_back();
      }
      // The caller may free the failed call's buffers before the started send is out (closeAll gives it
      // time): it goes on from a copy.
      if (started) keepOwnCopy(*p.sends.front());
      const std::string text = status.message().substr(0, kMaxNoticeBytes);
      auto op = newOp(kNoticeBit, nullptr, 0);
      op->owned.assign(reinterpret_cast<const std::byte*>(text.data()), reinterpret_cast<const std::byte*>(text.data()) + text.size());
      op->buf = op->owned.data();
      op->bytes = op->owned.size();
      p.sends.push_back(op);
      p.announced = true;
      flush(p);
    }
  }

  uint64_t linkActivity(int peer) override {
    if (peer < 0 || peer >= nranks_) return 0;
    Peer& p = peers_[size_t(peer)];
    if (p.fd.get() < 0 || p.broken) return 0;
    // SIOCOUTQ: bytes in the send queue the peer's host has not acknowledged yet.
    int unacked = 0;
    if (::ioctl(p.fd.get(), SIOCOUTQ, &unacked) != 0 || unacked < 0) unacked = 0;
    const uint64_t acked = p.written - std::min<uint64_t>(p.written, uint64_t(unacked));
    // Progress notices' bytes are not activity; an unacknowledged notice would lower the sum for a moment.
    // A header still arriving may be a notice's: its bytes count once it is whole and known to be a message's.
    const uint64_t partial = p.headerGot < sizeof p.header ? p.headerGot : 0;
    const uint64_t now = (p.read - std::min(p.read, p.controlRead + partial)) + (acked - std::min(acked, p.controlWritten));
    p.activity = std::max(p.activity, now);
    return p.activity;
  }

  void tellProgress(int peer, uint64_t seq, int64_t ageNs, uint32_t hops) override {
    if (peer < 0 || peer >= nranks_) return;
    Peer& p = peers_[size_t(peer)];
    if (p.fd.get() < 0 || p.broken || p.announced || (p.told != nullptr && !p.told->done.load(std::memory_order_acquire))) return;
    const ProgressNotice n{seq, std::max<int64_t>(ageNs, 0), hops, 0};
    auto op = newOp(kProgressBit, nullptr, 0);
    op->owned.assign(reinterpret_cast<const std::byte*>(&n), reinterpret_cast<const std::byte*>(&n) + sizeof n);
    op->buf = op->owned.data();
    op->bytes = op->owned.size();
    op->queuedNs = transport::ToldProgress::nowNs();
    p.told = op;
    p.sends.push_back(op);
    flush(p);
  }

  HeardProgress heardProgress(int peer, uint64_t seq) override {
    if (peer < 0 || peer >= nranks_) return {};
    const Peer& p = peers_[size_t(peer)];
    // Progress in an earlier call counts too: the peer must finish it before it gets to this one.
    return p.heard.forCall(seq);
  }

  std::string_view name() const override { return "tcp"; }
  std::string describe() const override {
    return "tcp sockets to " + std::to_string(connected_) + " rank(s) on other nodes, listening on " + listenAddress_;
  }
  std::string endpointKey() const override { return listenAddress_.substr(0, listenAddress_.rfind(':')); }
  void retire(std::shared_ptr<void> buffers) override { kept_.push_back(std::move(buffers)); }

 private:
  static std::shared_ptr<Op> newOp(uint64_t tag, std::byte* buf, size_t bytes) {
    auto op = std::make_shared<Op>();
    op->tag = tag;
    op->buf = buf;
    op->bytes = bytes;
    return op;
  }

  static void keepOwnCopy(Op& send) {
    if (send.buf == nullptr || !send.owned.empty()) return;
    send.owned.assign(send.buf, send.buf + send.bytes);
    send.buf = send.owned.data();
  }

  /// The peer's state when an operation with it can be posted (`evenBroken`: also when its connection
  /// is gone); otherwise fails `op` and returns null.
  Peer* usable(int peer, uint64_t tag, Op& op, bool evenBroken = false) {
    if (peer < 0 || peer >= nranks_ || peers_[size_t(peer)].fd.get() < 0) {
      finish(op, Status(Code::InvalidArgument, "tcp: rank " + std::to_string(peer) + " is not a rank on another node"));
      return nullptr;
    }
    if (tag > kMaxTag) {
      finish(op, Status(Code::InvalidArgument, "tcp: tag " + std::to_string(tag) + " is larger than " + std::to_string(kMaxTag)));
      return nullptr;
    }
    Peer& p = peers_[size_t(peer)];
    if (p.broken && !evenBroken) {
      finish(op, p.error);
      return nullptr;
    }
    return &p;
  }

  /// The first unclaimed message with the receive's tag that arrived before it, if any, is its: a whole
  /// one completes it now (or fails it, sizes differing) and goes; the one still arriving is claimed and
  /// completes it in endMessage (failed now already if the sizes differ).
  bool matchUnexpected(Peer& p, const std::shared_ptr<Op>& op) {
    auto it = std::find_if(p.unexpected.begin(), p.unexpected.end(),
                           [&](const Unexpected& u) { return u.tag == op->tag && u.claimedBy == nullptr; });
    if (it == p.unexpected.end()) return false;
    if (it->data.size() != op->bytes) finish(*op, sizeMismatch(p, op->tag, it->data.size(), op->bytes));
    if (&*it == p.stash) {
      it->claimedBy = op;
      return true;
    }
    if (!op->done.load(std::memory_order_relaxed)) {
      copyBytes(op->buf, it->data.data(), op->bytes);
      finish(*op, Status::ok());
    }
    p.unexpected.erase(it);
    return true;
  }

  static Status sizeMismatch(const Peer& p, uint64_t tag, size_t sent, size_t expected) {
    return Status(Code::InvalidUsage, "tcp: " + p.name + " sent " + std::to_string(sent) + " bytes with tag " +
                                          std::to_string(tag) + ", but the receive expects " + std::to_string(expected));
  }

  /// The connection broke: every operation with the peer fails, naming it.
  void breakPeer(Peer& p, const std::string& why) { breakPeer(p, Status(Code::RemoteError, "tcp: connection to " + p.name + " " + why)); }
  /// The peer is out of service with `error` (a broken connection, or its failure notice).
  void breakPeer(Peer& p, const Status& error) {
    p.broken = true;
    p.error = error;
    // A peer that closes with nothing pending has finished (its communicator went first): no warning.
    const bool pending = !p.sends.empty() || !p.posted.empty() || p.into != nullptr ||
                         std::any_of(p.unexpected.begin(), p.unexpected.end(), [](const Unexpected& u) { return u.claimedBy != nullptr; });
    if (pending) CFX_WARN(kNet, "%s", p.error.message().c_str());
    for (auto& op : p.sends) failUnlessDone(*op, p.error);
    for (auto& op : p.posted) failUnlessDone(*op, p.error);
    if (p.into != nullptr) failUnlessDone(*p.into, p.error);
    // Only the message being read can be claimed and still arriving (endMessage removes a claimed one
    // once it is in): its claimant fails, and its half is dropped so that no later receive takes it.
    // Whole unexpected messages stay: irecv still delivers them.
    if (p.stash != nullptr) {
      if (p.stash->claimedBy != nullptr) failUnlessDone(*p.stash->claimedBy, p.error);
      p.unexpected.remove_if([&](const Unexpected& u) { return &u == p.stash; });
    }
    p.sends.clear();
    p.posted.clear();
    p.into = nullptr;
    p.stash = nullptr;
    p.headerGot = 0;
    p.payloadGot = 0;
  }

  /// A request failed for a size mismatch keeps that status.
  static void failUnlessDone(Op& op, const Status& error) {
    if (!op.done.load(std::memory_order_acquire)) finish(op, error);
  }

  void flush(Peer& p) {
    while (!p.sends.empty() && !p.broken) {
      Op& op = *p.sends.front();
      Header h{op.tag, op.bytes};
      if (isProgress(h) && op.headerSent == 0) {
        // Queued behind a message, a notice leaves later than it was told: its age counts until now.
        ProgressNotice n;
        std::memcpy(&n, op.buf, sizeof n);
        const int64_t now = transport::ToldProgress::nowNs();
        n.ageNs += now - op.queuedNs;
        op.queuedNs = now;
        std::memcpy(op.buf, &n, sizeof n);
      }
      iovec iov[2];
      int n = 0;
      if (op.headerSent < sizeof h) iov[n++] = {reinterpret_cast<std::byte*>(&h) + op.headerSent, sizeof h - op.headerSent};
      if (op.sent < op.bytes) iov[n++] = {op.buf + op.sent, op.bytes - op.sent};
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(n);
      const ssize_t sent = n == 0 ? 0 : ::sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
        breakPeer(p, std::string("failed sending: ") + std::strerror(errno));
        return;
      }
      size_t left = static_cast<size_t>(sent);
      p.written += left;
      if (isProgress(h)) p.controlWritten += left;
      if (op.headerSent < sizeof h) {
        const size_t headerPart = std::min(left, sizeof h - op.headerSent);
        op.headerSent += headerPart;
        left -= headerPart;
        if (op.headerSent < sizeof h) return;  // the socket is full
      }
      op.sent += left;
      op.movedBytes.store(op.sent, std::memory_order_relaxed);
      if (op.sent < op.bytes) return;  // the socket is full
      finish(op, Status::ok());
      p.sends.pop_front();
    }
  }

  /// Reads what the socket has: headers, then payloads into their receives or the unexpected list.
  void readAll(Peer& p) {
    while (!p.broken) {
      std::byte* dst;
      size_t want;
      if (p.headerGot < sizeof p.header) {
        dst = reinterpret_cast<std::byte*>(&p.header) + p.headerGot;
        want = sizeof p.header - p.headerGot;
      } else {
        want = p.header.bytes - p.payloadGot;
        dst = payloadTarget(p, want);
      }
      const ssize_t n = want == 0 ? 0 : ::recv(p.fd.get(), dst, want, MSG_DONTWAIT);
      if (want != 0 && n == 0) {
        breakPeer(p, "closed by the peer");
        return;
      }
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
        breakPeer(p, std::string("failed receiving: ") + std::strerror(errno));
        return;
      }
      p.read += static_cast<uint64_t>(n);
      if (p.headerGot < sizeof p.header) {
        p.headerGot += static_cast<size_t>(n);
        if (p.headerGot == sizeof p.header) startPayload(p);
      } else {
        if (isProgress(p.header)) p.controlRead += static_cast<uint64_t>(n);
        p.payloadGot += static_cast<size_t>(n);
        notePayloadMoved(p);
      }
      if (p.headerGot == sizeof p.header && p.payloadGot == p.header.bytes) endMessage(p);
    }
  }

  /// The receive the arriving payload is for (matched, or claimed while it arrives unexpected) sees its
  /// bytes move, so that a slow message is not taken for a stuck one.
  static void notePayloadMoved(Peer& p) {
    Op* r = p.into != nullptr ? p.into.get() : p.stash != nullptr ? p.stash->claimedBy.get() : nullptr;
    if (r != nullptr) r->movedBytes.store(p.payloadGot, std::memory_order_relaxed);
  }

  /// A header arrived: the first receive posted for its tag takes the payload, else it is kept.
  void startPayload(Peer& p) {
    p.payloadGot = 0;
    if (isNotice(p.header)) {
      p.notice.assign(std::min<uint64_t>(p.header.bytes, kMaxNoticeBytes), '\0');
      return;  // payloadTarget reads it into p.notice (a longer one is cut)
    }
    if (isProgress(p.header)) {
      p.controlRead += sizeof p.header;
      p.progressIn = ProgressNotice{};
      if (p.header.bytes != sizeof p.progressIn) {
        breakPeer(p, Status(Code::RemoteError, "tcp: " + p.name + " sent a progress notice of " + std::to_string(p.header.bytes) +
                                                   " bytes, not " + std::to_string(sizeof p.progressIn) +
                                                   " (a corrupt stream, or a rank of another Conflux build)"));
      }
      return;  // payloadTarget reads it into p.progressIn
    }
    for (auto it = p.posted.begin(); it != p.posted.end(); ++it) {
      if ((*it)->tag != p.header.tag) continue;
      p.into = *it;
      p.posted.erase(it);
      if (p.into->bytes != p.header.bytes) {
        finish(*p.into, sizeMismatch(p, p.header.tag, p.header.bytes, p.into->bytes));
        p.into = nullptr;  // the payload is read and dropped
      }
      return;
    }
    // A size beyond this machine's memory is a corrupt stream, not a message: refused before allocating.
    std::vector<std::byte> data;
    bool held = p.header.bytes <= physicalBytes();
    try {
      if (held) data.resize(p.header.bytes);
    } catch (const std::bad_alloc&) {
      held = false;
    }
    if (!held) {
      breakPeer(p, Status(Code::RemoteError, "tcp: " + p.name + " sent a header for " + std::to_string(p.header.bytes) +
                                                 " bytes, more than this rank can hold"));
      return;
    }
    p.unexpected.push_back(Unexpected{p.header.tag, std::move(data), 0, nullptr});
    p.stash = &p.unexpected.back();
  }

  /// Where the next payload bytes go; lowers `want` to what fits there.
  std::byte* payloadTarget(Peer& p, size_t& want) {
    if (isNotice(p.header)) {
      if (p.payloadGot < p.notice.size()) {
        want = std::min(want, p.notice.size() - p.payloadGot);
        return reinterpret_cast<std::byte*>(p.notice.data()) + p.payloadGot;
      }
    } else if (isProgress(p.header)) {
      return reinterpret_cast<std::byte*>(&p.progressIn) + p.payloadGot;  // its size was checked
    } else if (p.into != nullptr) {
      return p.into->buf + p.payloadGot;
    } else if (p.stash != nullptr) {
      return p.stash->data.data() + p.payloadGot;
    }
    // Dropped bytes (a mismatched message, the rest of an overlong notice), a piece at a time.
    p.sink.resize(64 << 10);
    want = std::min(want, p.sink.size());
    return p.sink.data();
  }

  void endMessage(Peer& p) {
    if (isProgress(p.header)) {
      p.headerGot = p.payloadGot = 0;
      p.heard.keep(p.progressIn.seq, p.progressIn.ageNs, p.progressIn.hops, transport::ToldProgress::nowNs());
      return;
    }
    if (isNotice(p.header)) {
      // The sender's communicator failed, so this one cannot complete a call either: every operation
      // fails with its text, whichever peer it waits for.
      p.headerGot = p.payloadGot = 0;
      const Status error(Code::RemoteError, "tcp: " + p.notice);
      for (Peer& q : peers_) {
        if (q.fd.get() >= 0 && !q.broken) breakPeer(q, error);
      }
      return;
    }
    if (p.into != nullptr) {
      finish(*p.into, Status::ok());
    } else if (p.stash != nullptr) {
      p.stash->received = p.header.bytes;
      if (std::shared_ptr<Op> waiting = p.stash->claimedBy) {
        if (!waiting->done.load(std::memory_order_acquire)) {  // not failed for a size mismatch
          copyBytes(waiting->buf, p.stash->data.data(), p.header.bytes);
          finish(*waiting, Status::ok());
        }
        p.unexpected.remove_if([&](const Unexpected& u) { return &u == p.stash; });
      }
    }
    p.into = nullptr;
    p.stash = nullptr;
    p.headerGot = 0;
    p.payloadGot = 0;
  }

  /// Closes every connection: what is queued (a failure notice) gets up to 200 ms to leave, then each
  /// socket stops sending and its unread bytes are drained, so that closing it sends no reset that could
  /// overtake the notice.
  void closeAll() {
    const auto until = transport::Clock::now() + std::chrono::milliseconds(200);
    for (Peer& p : peers_) {
      if (p.fd.get() < 0) continue;
      while (!p.broken && !p.sends.empty() && transport::Clock::now() < until) {
        flush(p);
        if (p.sends.empty()) break;
        pollfd w{p.fd.get(), POLLOUT, 0};
        ::poll(&w, 1, 10);
      }
      ::shutdown(p.fd.get(), SHUT_WR);
      drain(p, p.announced ? until : transport::Clock::now());
      p.fd.reset();
    }
  }

  /// Reads and drops what the peer sends until it closes too or `until` passes (at least what has
  /// arrived already): unread bytes at close would make the kernel reset the connection, and a reset
  /// can destroy a notice the peer has not read yet.
  static void drain(Peer& p, Deadline until) {
    std::byte bytes[4096];
    for (;;) {
      const ssize_t n = ::recv(p.fd.get(), bytes, sizeof bytes, MSG_DONTWAIT);
      if (n > 0) continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return;  // closed, or broken
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - transport::Clock::now()).count();
      if (left <= 0) return;
      pollfd r{p.fd.get(), POLLIN, 0};
      ::poll(&r, 1, static_cast<int>(std::min<long long>(left, 10)));
    }
  }

  int rank_;
  int nranks_;
  int connected_ = 0;
  std::string listenAddress_;
  std::vector<Peer> peers_;
  std::vector<pollfd> fds_;
  std::vector<std::shared_ptr<void>> kept_;  // retire(): buffers of a failed call, freed after the sockets close
};

}  // namespace

std::shared_ptr<transport::Network> openNetwork(const transport::NetOpenArgs& args) {
  return std::make_shared<TcpNetwork>(args, connectAll(args));
}

}  // namespace conflux::tcp
