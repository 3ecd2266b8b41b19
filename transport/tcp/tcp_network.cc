// The tcp transport's messages: per peer, a queue of sends, the receives posted and not yet matched, the
// messages that arrived before their receive, and the message being read (tcp_network.h).
#include "transport/tcp/tcp_network.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <list>

#include "core/log.h"
#include "transport/tcp/tcp_connect.h"

namespace conflux::tcp {
namespace {

using transport::Deadline;
using transport::Request;
using transport::RequestState;

struct Header {
  uint64_t tag;
  uint64_t bytes;
};

// A header with this tag bit carries no message but the sender's failure (announceFailure): its text.
constexpr uint64_t kNoticeBit = uint64_t{1} << 63;
constexpr size_t kMaxNoticeBytes = 1024;

struct Op : RequestState {
  uint64_t tag = 0;  // kNoticeBit: a failure notice, whose text is `notice`
  std::string notice;
  std::byte* buf = nullptr;  // a send's source (read only) or a receive's destination
  size_t moved = 0;          // payload bytes moved
  size_t headerSent = 0;     // a send's header bytes moved
};

void finish(Op& op, const Status& s) {
  op.status = s;
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
  std::string notice;  // a failure notice being read
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
      for (auto it = p->unexpected.begin(); it != p->unexpected.end(); ++it) {
        if (it->tag != tag || it->claimedBy != nullptr) continue;
        if (it->data.size() != bytes) {
          finish(*op, sizeMismatch(*p, tag, it->data.size(), bytes));
        } else if (&*it != p->stash) {
          if (bytes > 0) std::memcpy(buf, it->data.data(), bytes);
          finish(*op, Status::ok());
        }
        if (&*it == p->stash) {
          it->claimedBy = op;  // still arriving: completes (or was failed) when the rest is in
          return Request(op);
        }
        p->unexpected.erase(it);
        return Request(op);
      }
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
    if (fds_.empty() || left <= 0) return;
    const long long ns = std::min<long long>(left, 1000000000LL);
    const timespec ts{static_cast<time_t>(ns / 1000000000LL), static_cast<long>(ns % 1000000000LL)};
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
      auto op = newOp(kNoticeBit, nullptr, 0);
      op->notice = status.message().substr(0, kMaxNoticeBytes);
      op->buf = reinterpret_cast<std::byte*>(op->notice.data());
      op->bytes = op->notice.size();
      p.sends.push_back(op);
      flush(p);
    }
  }

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
    for (auto& op : p.sends) finish(*op, p.error);
    for (auto& op : p.posted) finish(*op, p.error);
    for (auto& u : p.unexpected) {
      if (u.claimedBy != nullptr) finish(*u.claimedBy, p.error);
    }
    if (p.into != nullptr) finish(*p.into, p.error);
    p.sends.clear();
    p.posted.clear();
    p.into = nullptr;
  }

  void flush(Peer& p) {
    while (!p.sends.empty() && !p.broken) {
      Op& op = *p.sends.front();
      Header h{op.tag, op.bytes};
      iovec iov[2];
      int n = 0;
      if (op.headerSent < sizeof h) iov[n++] = {reinterpret_cast<std::byte*>(&h) + op.headerSent, sizeof h - op.headerSent};
      if (op.moved < op.bytes) iov[n++] = {op.buf + op.moved, op.bytes - op.moved};
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
      if (op.headerSent < sizeof h) {
        const size_t headerPart = std::min(left, sizeof h - op.headerSent);
        op.headerSent += headerPart;
        left -= headerPart;
        if (op.headerSent < sizeof h) return;  // the socket is full
      }
      op.moved += left;
      if (op.moved < op.bytes) return;  // the socket is full
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
      if (p.headerGot < sizeof p.header) {
        p.headerGot += static_cast<size_t>(n);
        if (p.headerGot == sizeof p.header) startPayload(p);
      } else {
        p.payloadGot += static_cast<size_t>(n);
      }
      if (p.headerGot == sizeof p.header && p.payloadGot == p.header.bytes) endMessage(p);
    }
  }

  /// A header arrived: the first receive posted for its tag takes the payload, else it is kept.
  void startPayload(Peer& p) {
    p.payloadGot = 0;
    if ((p.header.tag & kNoticeBit) != 0) {
      p.notice.assign(std::min<uint64_t>(p.header.bytes, kMaxNoticeBytes), '\0');
      return;  // payloadTarget reads it into p.notice (a longer one is cut)
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
    p.unexpected.push_back(Unexpected{p.header.tag, std::vector<std::byte>(p.header.bytes), 0, nullptr});
    p.stash = &p.unexpected.back();
  }

  /// Where the next payload bytes go; lowers `want` to what fits there.
  std::byte* payloadTarget(Peer& p, size_t& want) {
    if ((p.header.tag & kNoticeBit) != 0 && p.payloadGot < p.notice.size()) {
      want = std::min(want, p.notice.size() - p.payloadGot);
      return reinterpret_cast<std::byte*>(p.notice.data()) + p.payloadGot;
    }
    if ((p.header.tag & kNoticeBit) == 0 && p.into != nullptr) return p.into->buf + p.payloadGot;
    if ((p.header.tag & kNoticeBit) == 0 && p.stash != nullptr) return p.stash->data.data() + p.payloadGot;
    // Dropped bytes (a mismatched message, the rest of an overlong notice), a piece at a time.
    p.sink.resize(64 << 10);
    want = std::min(want, p.sink.size());
    return p.sink.data();
  }

  void endMessage(Peer& p) {
    if ((p.header.tag & kNoticeBit) != 0) {
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
          if (p.header.bytes > 0) std::memcpy(waiting->buf, p.stash->data.data(), p.header.bytes);
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
      std::byte drain[4096];
      while (::recv(p.fd.get(), drain, sizeof drain, MSG_DONTWAIT) > 0) {
      }
      p.fd.reset();
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
