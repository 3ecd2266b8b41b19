#include "transport/tcp/tcp_connect.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include "core/bootstrap/store_server.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "transport/tcp/tcp_wire.h"

namespace conflux::tcp {
namespace {

using Clock = std::chrono::steady_clock;

using wire::Endpoint;
using wire::Hello;
using wire::kHelloMagic;

constexpr auto kHelloWait = std::chrono::seconds(5);

[[noreturn]] void fail(const std::string& what) {
  throw Error(Code::SystemError, "tcp: " + what + ": " + std::strerror(errno));
}

/// Waits for `events` on `fd` until `deadline`; false on timeout.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, bootstrap::pollTimeoutMs(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) fail("poll");
  }
}

/// Moves all of [buf, buf+bytes) through a non-blocking socket before `deadline`. Throws RemoteError
/// when the peer closes, Timeout, SystemError (bootstrap::sendAll/recvAll, but with the transport's words).
void transfer(int fd, void* buf, size_t bytes, bool out, Clock::time_point deadline, const std::string& what) {
  auto* p = static_cast<char*>(buf);
  while (bytes > 0) {
    const ssize_t n = out ? ::send(fd, p, bytes, MSG_NOSIGNAL) : ::recv(fd, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n == 0) {
      throw Error(Code::RemoteError, "tcp: " + what + ": the peer closed the connection");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!waitFor(fd, out ? POLLOUT : POLLIN, deadline)) throw Error(Code::Timeout, "tcp: " + what + ": timed out");
    } else if (errno != EINTR) {
      fail(what);
    }
  }
}

void setNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // small messages leave at once
}

/// The address to listen on, and where it came from (for errors).
struct BindAddress {
  std::string host;
  std::string from;
};

BindAddress bindAddress() {
  const std::string set = config::getString(config::Var::TCP_ADDR);
  if (!set.empty()) return {set, "CONFLUX_TCP_ADDR"};
  return {bootstrap::pickBindHost(false), "tcp: the address picked for this node (CONFLUX_TCP_ADDR chooses another)"};
}

Fd listenOn(const BindAddress& address, int backlog, uint16_t& port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (::inet_pton(AF_INET, address.host.c_str(), &sa.sin_addr) != 1) {
    throw Error(Code::InvalidArgument, address.from + ": '" + address.host + "' is not an IPv4 address");
  }
  if (sa.sin_addr.s_addr == htonl(INADDR_ANY)) {
    // Other ranks connect to the address published, and 0.0.0.0 names no host.
    throw Error(Code::InvalidArgument,
                address.from + ": '" + address.host + "' is not an address other ranks can connect to; give this node's own");
  }
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) fail("socket");
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) fail("bind to " + address.host);
  if (::listen(fd.get(), backlog) != 0) fail("listen");
  socklen_t len = sizeof sa;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) fail("getsockname");
  port = ntohs(sa.sin_port);
  bootstrap::makeNonBlocking(fd.get());
  return fd;
}

/// @p source (CONFLUX_TCP_BIND_SOURCE): this rank's own address, so that its messages leave by the NIC
/// that address is on, not by whichever the destination's route names; null: the kernel picks.
Fd connectTo(const Endpoint& e, int peer, Clock::time_point deadline, const bootstrap::SockAddr* source) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(e.port);
  if (::inet_pton(AF_INET, e.address, &sa.sin_addr) != 1) {
    throw Error(Code::InvalidArgument, "tcp: rank " + std::to_string(peer) + " sent a bad address '" + e.address + "'");
  }
  bootstrap::SockAddr addr;
  std::memcpy(&addr.storage, &sa, sizeof sa);
  addr.len = sizeof sa;
  Fd fd;
  if (const int err = bootstrap::tryConnect(addr, deadline, &fd, source); err != 0) {  // sets TCP_NODELAY too
    const std::string what = "connecting to rank " + std::to_string(peer) + " at " + e.address + ":" +
                             std::to_string(e.port) + (source != nullptr ? " from this rank's address (CONFLUX_TCP_BIND_SOURCE)" : "");
    if (err == ETIMEDOUT) throw Error(Code::Timeout, "tcp: " + what + ": timed out");
    errno = err;
    fail(what);
  }
  return fd;
}

/// Reads a connecting side's hello. A peer sends it right after connecting, so one that closes or says
/// nothing for kHelloWait is a stranger: false, and the caller drops it and goes on accepting.
bool readHello(int fd, Hello& hello, Clock::time_point deadline) {
  try {
    transfer(fd, &hello, sizeof hello, false, deadline, "hello from a peer");
    return true;
  } catch (const Error& e) {
    if (e.code() != Code::RemoteError && e.code() != Code::Timeout) throw;
    CFX_WARN(kNet, "%s (dropped)", e.what());
    return false;
  }
}

}  // namespace

Connections connectAll(const transport::NetOpenArgs& args) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(args.timeoutMs);
  auto local = [&](int r) { return std::find(args.localRanks.begin(), args.localRanks.end(), r) != args.localRanks.end(); };
  const BindAddress address = bindAddress();
  uint16_t port = 0;
  Fd listener = listenOn(address, std::max(16, args.nranks), port);
  std::optional<bootstrap::SockAddr> source;
  if (config::getBool(config::Var::TCP_BIND_SOURCE)) source = bootstrap::resolveAddress(address.host, 0);
  Endpoint mine{};
  std::strncpy(mine.address, address.host.c_str(), sizeof mine.address - 1);
  mine.port = port;
  std::vector<uint8_t> blob(sizeof mine);
  std::memcpy(blob.data(), &mine, sizeof mine);
  const std::vector<uint8_t> all = args.allGather(blob);

  Connections c;
  c.peers.resize(static_cast<size_t>(args.nranks));
  c.listenAddress = address.host + ":" + std::to_string(port);
  // The lower rank of a pair connects: all connects first (the listeners' backlogs take them), then the
  // accepts, so no rank waits on one that is itself waiting.
  int toAccept = 0;
  for (int r = 0; r < args.nranks; ++r) {
    if (r == args.rank || local(r)) continue;
    if (r < args.rank) {
      ++toAccept;
      continue;
    }
    Endpoint e;
    std::memcpy(&e, all.data() + size_t(r) * sizeof e, sizeof e);
    e.address[sizeof e.address - 1] = '\0';
    Fd fd = connectTo(e, r, deadline, source ? &*source : nullptr);
    Hello hello{kHelloMagic, args.rank};
    transfer(fd.get(), &hello, sizeof hello, true, deadline, "hello to rank " + std::to_string(r));
    c.peers[size_t(r)] = std::move(fd);
  }
  while (toAccept > 0) {
    if (!waitFor(listener.get(), POLLIN, deadline)) {
      throw Error(Code::Timeout, "tcp: " + std::to_string(toAccept) + " lower rank(s) on other nodes did not connect to " +
                                     c.listenAddress + " within " + std::to_string(args.timeoutMs) + " ms");
    }
    Fd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (fd.get() < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) continue;
      fail("accept");
    }
    setNoDelay(fd.get());
    Hello hello{};
    if (!readHello(fd.get(), hello, std::min(deadline, Clock::now() + kHelloWait))) continue;
    const int r = hello.rank;
    if (hello.magic == wire::kOlderHelloMagic) {
      CFX_WARN(kNet, "tcp: dropped a connection from rank %d, which runs an older Conflux build (every rank must run the same build)", r);
      continue;
    }
    if (hello.magic != kHelloMagic || r < 0 || r >= args.rank || local(r) || c.peers[size_t(r)].get() >= 0) {
      CFX_WARN(kNet, "tcp: dropped a connection to %s that is not a peer of this communicator (its hello: magic %#x, rank %d)",
               c.listenAddress.c_str(), hello.magic, r);
      continue;  // dropped (fd closes): the peers still come
    }
    c.peers[size_t(r)] = std::move(fd);
    --toAccept;
  }
  return c;
}

}  // namespace conflux::tcp
