#include "transport/tcp/tcp_connect.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/bootstrap/store_server.h"
#include "core/config.h"
#include "core/error.h"

namespace conflux::tcp {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kHelloMagic = 0x43465854;  // "CFXT"

/// One rank's listening address, as it travels in the all-gather.
struct Endpoint {
  char address[64];
  uint16_t port;
};

/// What the connecting side sends first.
struct Hello {
  uint32_t magic;
  int32_t rank;
};

[[noreturn]] void fail(const std::string& what) {
  throw Error(Code::SystemError, "tcp: " + what + ": " + std::strerror(errno));
}

int msLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<long long>(0, left));
}

/// Waits for `events` on `fd` until `deadline`; false on timeout.
bool waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, msLeft(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) fail("poll");
  }
}

/// Moves all of [buf, buf+bytes) through a non-blocking socket before `deadline`.
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

void makeNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) fail("fcntl(O_NONBLOCK)");
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // small messages leave at once
}

std::string bindAddress() {
  const std::string set = config::getString(config::Var::TCP_ADDR);
  return set.empty() ? bootstrap::pickBindHost(false) : set;
}

Fd listenOn(const std::string& address, int backlog, uint16_t& port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (::inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    throw Error(Code::InvalidArgument, "CONFLUX_TCP_ADDR: '" + address + "' is not an IPv4 address");
  }
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) fail("socket");
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) fail("bind to " + address);
  if (::listen(fd.get(), backlog) != 0) fail("listen");
  socklen_t len = sizeof sa;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) fail("getsockname");
  port = ntohs(sa.sin_port);
  makeNonBlocking(fd.get());
  return fd;
}

Fd connectTo(const Endpoint& e, int peer, Clock::time_point deadline) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(e.port);
  if (::inet_pton(AF_INET, e.address, &sa.sin_addr) != 1) {
    throw Error(Code::InvalidArgument, "tcp: rank " + std::to_string(peer) + " sent a bad address '" + e.address + "'");
  }
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) fail("socket");
  makeNonBlocking(fd.get());
  const std::string what = "connecting to rank " + std::to_string(peer) + " at " + e.address + ":" + std::to_string(e.port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno != EINPROGRESS) fail(what);
    if (!waitFor(fd.get(), POLLOUT, deadline)) throw Error(Code::Timeout, "tcp: " + what + ": timed out");
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      errno = err;
      fail(what);
    }
  }
  return fd;
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() { reset(); }

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Connections connectAll(const transport::NetOpenArgs& args) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(args.timeoutMs);
  auto local = [&](int r) { return std::find(args.localRanks.begin(), args.localRanks.end(), r) != args.localRanks.end(); };
  const std::string address = bindAddress();
  uint16_t port = 0;
  Fd listener = listenOn(address, std::max(16, args.nranks), port);
  Endpoint mine{};
  std::strncpy(mine.address, address.c_str(), sizeof mine.address - 1);
  mine.port = port;
  std::vector<uint8_t> blob(sizeof mine);
  std::memcpy(blob.data(), &mine, sizeof mine);
  const std::vector<uint8_t> all = args.allGather(blob);

  Connections c;
  c.peers.resize(static_cast<size_t>(args.nranks));
  c.listenAddress = address + ":" + std::to_string(port);
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
    Fd fd = connectTo(e, r, deadline);
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
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Hello hello{};
    transfer(fd.get(), &hello, sizeof hello, false, deadline, "hello from a peer");
    const int r = hello.rank;
    if (hello.magic != kHelloMagic || r < 0 || r >= args.rank || local(r) || c.peers[size_t(r)].get() >= 0) {
      continue;  // not a peer of this communicator: dropped (fd closes), the peers still come
    }
    c.peers[size_t(r)] = std::move(fd);
    --toAccept;
  }
  return c;
}

}  // namespace conflux::tcp
