// The rendezvous store's server loop; see store_server.h and the protocol in wire.h.
//
// Each connection (store_conn.h) is a small state machine driven by pump(): read at most one frame
// (header first, so the length is validated before any allocation), process it when the connection is
// idle (no reply queued, no GET waiting), queue replies and flush them without blocking. GETs of absent
// keys park the connection in `waiters` until a SET/ADD of the key or their wait time passes.
#include "core/bootstrap/store_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/bootstrap/crypto.h"
#include "core/bootstrap/kv_table.h"
#include "core/bootstrap/store_conn.h"
#include "core/bootstrap/wire.h"
#include "core/error.h"
#include "core/log.h"

namespace conflux::bootstrap {

using wire::Msg;
using Conn = StoreConn;
using Phase = ConnPhase;

struct StoreServer::Impl {
  std::array<uint8_t, 32> secret;
  StoreServerOptions options;
  Fd listenFd, wakeFd;
  sockaddr_storage bound{};
  std::atomic<bool> stop{false};
  std::atomic<size_t> connCount{0}, keys{0};
  std::thread thread;

  // Owned by the server thread.
  std::vector<std::unique_ptr<Conn>> conns;
  std::unordered_map<std::string, std::vector<Conn*>> waiters;
  KvTable table{0};
  Deadline acceptPausedUntil{};

  void run();
  void step(std::vector<pollfd>& fds);
  void acceptAll();
  void pump(Conn& c);
  bool readSome(Conn& c);
  bool flush(Conn& c);
  void process(Conn& c);
  void handshake(Conn& c);
  void request(Conn& c);
  void wakeWaiters(const std::string& key, const SharedValue& v);
  void unpark(Conn& c);
  void drop(Conn& c, const std::string& why);
  void expire();
};

void StoreServer::Impl::drop(Conn& c, const std::string& why) {
  if (c.phase == Phase::Dead) return;
  if (!why.empty()) {
    CFX_WARN(kBootstrap, "bootstrap: store %s dropped client %s: %s", formatAddress(bound).c_str(),
             c.peer.c_str(), why.c_str());
  }
  unpark(c);
  c.phase = Phase::Dead;
  c.fd.reset();
  c.out.clear();
}

void StoreServer::Impl::unpark(Conn& c) {
  if (!c.waiting) return;
  auto it = waiters.find(c.waitKey);
  if (it != waiters.end()) {
    std::erase(it->second, &c);
    if (it->second.empty()) waiters.erase(it);
  }
  c.waiting = false;
}

void StoreServer::Impl::acceptAll() {
  for (int i = 0; i < 256; ++i) {  // bounded, so a flood of connects cannot starve the others
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = ::accept4(listenFd.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        CFX_WARN(kBootstrap, "bootstrap: store %s cannot accept: %s; pausing accepts",
                 formatAddress(bound).c_str(), strerror(errno));
        acceptPausedUntil = Clock::now() + std::chrono::milliseconds(100);
      }
      return;  // EAGAIN: nothing more to accept
    }
    Fd owned(fd);
    std::string peer = formatAddress(ss);
    if (connCount.load() >= options.maxConnections) {
      CFX_WARN(kBootstrap, "bootstrap: store %s refused client %s: already %zu connections",
               formatAddress(bound).c_str(), peer.c_str(), options.maxConnections);
      continue;  // closed by owned's destructor
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Conn>();
    c->fd = std::move(owned);
    c->peer = peer;
    c->deadline = Clock::now() + options.handshakeTimeout;
    std::vector<uint8_t> nonce = randomBytes(wire::kNonceBytes);
    std::copy(nonce.begin(), nonce.end(), c->nonce.begin());
    std::vector<uint8_t> hello;
    wire::putU32(hello, wire::kMagic);
    hello.push_back(wire::kVersion);
    hello.insert(hello.end(), nonce.begin(), nonce.end());
    c->queue(Msg::Hello, hello);
    CFX_TRACE(kBootstrap, "bootstrap: store accepted %s", peer.c_str());
    conns.push_back(std::move(c));
    connCount.store(connCount.load() + 1);
    pump(*conns.back());
  }
}

// Sends queued replies until done or the socket is full. False when the connection was dropped.
bool StoreServer::Impl::flush(Conn& c) {
  ConnIo io = c.flush();
  if (io == ConnIo::Failed) {
    drop(c, c.phase == Phase::Ready ? "" : std::string("send failed: ") + strerror(errno));
    return false;
  }
  if (io == ConnIo::Progress && c.phase == Phase::Closing) {
    drop(c, "");
    return false;
  }
  return true;
}

// Reads towards the current frame. False when there is nothing more for now or the connection was dropped.
bool StoreServer::Impl::readSome(Conn& c) {
  const bool ready = c.phase == Phase::Ready;
  size_t badLength = 0;
  switch (c.read(ready ? wire::kMaxFrame : wire::kMaxHandshakeFrame, &badLength)) {
    case ConnIo::Progress: return true;
    case ConnIo::Again: return false;
    case ConnIo::Closed: drop(c, ready ? "" : "closed the connection during authentication"); return false;
    case ConnIo::Failed: drop(c, ready ? "" : std::string("recv failed: ") + strerror(errno)); return false;
    case ConnIo::BadLength:
      drop(c, "invalid frame length " + std::to_string(badLength) + " (limit " +
                  std::to_string(ready ? wire::kMaxFrame : wire::kMaxHandshakeFrame) +
                  (ready ? ")" : " before authentication; not a Conflux client?)"));
      return false;
  }
  return false;
}

void StoreServer::Impl::pump(Conn& c) {
  while (c.phase != Phase::Dead) {
    if (!c.out.empty() && !flush(c)) return;
    if (c.busy() || c.phase == Phase::Closing) return;
    if (c.frameComplete()) {
      try {
        process(c);
      } catch (const std::exception& e) {  // e.g. bad_alloc: lose this client, keep the others
        drop(c, std::string("cannot serve its request: ") + e.what());
        return;
      }
      c.nextFrame();
      continue;
    }
    if (!readSome(c)) return;
  }
}

void StoreServer::Impl::process(Conn& c) {
  if (c.phase == Phase::Handshake) {
    handshake(c);
  } else {
    request(c);
  }
}

void StoreServer::Impl::handshake(Conn& c) {
  if (c.bodyLen != 1 + 2 * wire::kNonceBytes || c.body[0] != static_cast<uint8_t>(Msg::Auth)) {
    drop(c, "sent garbage instead of an authentication message (not a Conflux client?)");
    return;
  }
  const uint8_t* clientNonce = c.body.data() + 1;
  Digest expected = wire::clientProof(secret, c.nonce.data(), clientNonce);
  if (!constantTimeEqual(expected.data(), clientNonce + wire::kNonceBytes, expected.size())) {
    CFX_WARN(kBootstrap, "bootstrap: store %s refused client %s: authentication failed (wrong secret)",
             formatAddress(bound).c_str(), c.peer.c_str());
    c.queue(Msg::AuthFail);
    c.phase = Phase::Closing;
    c.deadline = Clock::now() + std::chrono::milliseconds(500);
    return;
  }
  Digest proof = wire::serverProof(secret, c.nonce.data(), clientNonce);
  c.queue(Msg::AuthOk, {proof.begin(), proof.end()});
  c.phase = Phase::Ready;
}

void StoreServer::Impl::request(Conn& c) {
  wire::Request req;
  Msg type = static_cast<Msg>(c.body[0]);
  std::string err = wire::parseRequest(type, c.body.data() + 1, c.bodyLen - 1, &req);
  if (!err.empty()) {
    c.queue(Msg::Error, std::vector<uint8_t>(err.begin(), err.end()));
    return;
  }
  std::string key(req.key);
  switch (type) {
    case Msg::Set: {
      auto v = std::make_shared<const std::vector<uint8_t>>(req.operand, req.operand + req.operandLen);
      err = table.set(key, v);
      if (err.empty()) {
        c.queue(Msg::Ok);
        wakeWaiters(key, v);
      }
      break;
    }
    case Msg::Add: {
      int64_t result = 0;
      err = table.add(key, static_cast<int64_t>(wire::getU64(req.operand)), &result);
      if (err.empty()) {
        std::vector<uint8_t> body;
        wire::putU64(body, static_cast<uint64_t>(result));
        c.queue(Msg::Int, std::move(body));
        wakeWaiters(key, table.find(key));
      }
      break;
    }
    case Msg::Get:
      if (SharedValue v = table.find(key)) {
        c.queueValue(std::move(v));
      } else {
        c.waiting = true;
        c.waitKey = key;
        c.waitDeadline = Clock::now() + std::chrono::milliseconds(wire::getU32(req.operand));
        waiters[key].push_back(&c);
      }
      break;
    case Msg::Check: c.queue(Msg::Bool, {static_cast<uint8_t>(table.find(key) != nullptr)}); break;
    case Msg::Delete: c.queue(Msg::Bool, {static_cast<uint8_t>(table.erase(key))}); break;
    default: break;
  }
  if (!err.empty()) c.queue(Msg::Error, std::vector<uint8_t>(err.begin(), err.end()));
  keys.store(table.size());
}

void StoreServer::Impl::wakeWaiters(const std::string& key, const SharedValue& v) {
  auto it = waiters.find(key);
  if (it == waiters.end()) return;
  std::vector<Conn*> woken = std::move(it->second);
  waiters.erase(it);
  for (Conn* w : woken) {
    w->waiting = false;
    w->queueValue(v);
    flush(*w);  // the rest is sent from the poll loop
  }
}

void StoreServer::Impl::expire() {
  Deadline now = Clock::now();
  for (auto& c : conns) {
    if (c->phase == Phase::Handshake && now >= c->deadline) {
      drop(*c, "silent for " + std::to_string(options.handshakeTimeout.count()) +
                   " ms during authentication");
    } else if (c->phase == Phase::Closing && now >= c->deadline) {
      drop(*c, "");
    } else if (c->waiting && now >= c->waitDeadline) {
      unpark(*c);
      c->queue(Msg::Missing);
      flush(*c);
    }
  }
}

void StoreServer::Impl::run() {
  std::vector<pollfd> fds;
  while (!stop.load()) {
    try {
      step(fds);
    } catch (const std::exception& e) {  // e.g. bad_alloc: keep serving the others
      CFX_WARN(kBootstrap, "bootstrap: store %s: %s", formatAddress(bound).c_str(), e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

// One poll round: pump ready connections, accept new ones, expire deadlines, erase the closed.
void StoreServer::Impl::step(std::vector<pollfd>& fds) {
  Deadline now = Clock::now();
  Deadline next = now + std::chrono::seconds(1);
  for (auto& c : conns) {  // a connection that just became idle may hold a whole unprocessed frame
    if (c->phase != Phase::Dead && !c->busy() && c->frameComplete()) pump(*c);
  }
  fds.clear();
  fds.push_back({wakeFd.get(), POLLIN, 0});
  fds.push_back({listenFd.get(), static_cast<short>(now >= acceptPausedUntil ? POLLIN : 0), 0});
  if (now < acceptPausedUntil) next = std::min(next, acceptPausedUntil);
  for (auto& c : conns) {
    short events = 0;
    if (!c->out.empty()) events |= POLLOUT;
    // A busy connection (a parked GET, or a reply not sent yet) reads nothing until it is idle: its
    // client's next request waits, one outstanding at a time. Polling it for input would spin on what
    // arrived (an end of stream above all, as from a rank that died waiting) and keep it until the
    // GET's wait ran out; only its client going away (POLLRDHUP) matters then.
    if (c->busy()) events |= POLLRDHUP;
    else if (!c->frameComplete() && c->phase != Phase::Closing) events |= POLLIN;
    fds.push_back({c->fd.get(), events, 0});
    if (c->phase != Phase::Ready) next = std::min(next, c->deadline);
    if (c->waiting) next = std::min(next, c->waitDeadline);
  }
  int n = ::poll(fds.data(), fds.size(), pollTimeoutMs(next));
  if (n < 0 && errno != EINTR) {
    CFX_WARN(kBootstrap, "bootstrap: store poll failed: %s", strerror(errno));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (n > 0) {
    size_t count = conns.size();  // acceptAll appends; the new ones were pumped already
    for (size_t i = 0; i < count; ++i) {
      const pollfd& p = fds[i + 2];
      if ((p.revents & (POLLHUP | POLLERR | POLLRDHUP)) && !(p.events & POLLIN)) {
        drop(*conns[i], conns[i]->phase == Phase::Ready ? "" : "connection lost during authentication");
      } else if (p.revents != 0) {
        pump(*conns[i]);
      }
    }
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] ssize_t r = ::read(wakeFd.get(), &v, sizeof v);
    }
    if (fds[1].revents & POLLIN) acceptAll();
  }
  expire();
  size_t before = conns.size();
  std::erase_if(conns, [](const std::unique_ptr<Conn>& c) { return c->phase == Phase::Dead; });
  if (conns.size() != before) connCount.store(conns.size());
}

StoreServer::StoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::shared_ptr<StoreServer> StoreServer::start(const std::string& bindHost, uint16_t port,
                                                const std::array<uint8_t, 32>& secret,
                                                const StoreServerOptions& options) {
  SockAddr addr = resolveAddress(bindHost, port);  // numeric wildcards ("0.0.0.0", "::") resolve too
  return serveOn(listenOn(addr, 512), secret, options);
}

std::shared_ptr<StoreServer> StoreServer::serveOn(Fd listening, const std::array<uint8_t, 32>& secret,
                                                  const StoreServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->secret = secret;
  impl->options = options;
  impl->table = KvTable(options.maxStoredBytes);
  makeNonBlocking(listening.get());
  impl->listenFd = std::move(listening);
  socklen_t len = sizeof impl->bound;
  if (getsockname(impl->listenFd.get(), reinterpret_cast<sockaddr*>(&impl->bound), &len) != 0) {
    throwSystemError("bootstrap: getsockname");
  }
  impl->wakeFd.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl->wakeFd.valid()) throwSystemError("bootstrap: eventfd");
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  CFX_INFO(kBootstrap, "bootstrap: store listening on %s", formatAddress(impl->bound).c_str());
  return std::shared_ptr<StoreServer>(new StoreServer(std::move(impl)));
}

std::shared_ptr<StoreServer> StoreServer::startForNewJob(bool allLocal) {
  std::array<uint8_t, 32> secret;
  std::vector<uint8_t> r = randomBytes(secret.size());
  std::copy(r.begin(), r.end(), secret.begin());
  return start(pickBindHost(allLocal), 0, secret);
}

StoreServer::~StoreServer() {
  impl_->stop.store(true);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(impl_->wakeFd.get(), &one, sizeof one);
  impl_->thread.join();
}

sockaddr_storage StoreServer::address() const { return impl_->bound; }

UniqueId StoreServer::uniqueId() const {
  const sockaddr_storage& ss = impl_->bound;
  bool wildcard = ss.ss_family == AF_INET
                      ? reinterpret_cast<const sockaddr_in&>(ss).sin_addr.s_addr == htonl(INADDR_ANY)
                      : IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr);
  if (wildcard) {
    throw Error(Code::InvalidUsage, "bootstrap: store bound to wildcard address " + formatAddress(ss) +
                                        " has no address to hand out; bind it to an interface address");
  }
  UniqueId id;
  id.addr = ss;
  id.addrLen = addressLength(ss);
  id.secret = impl_->secret;
  return id;
}

size_t StoreServer::connectionCount() const { return impl_->connCount.load(); }
size_t StoreServer::keyCount() const { return impl_->keys.load(); }

}  // namespace conflux::bootstrap
