// Socket plumbing for the bootstrap; see socket.h.
#include "core/bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "core/error.h"

namespace conflux::bootstrap {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) reset(std::exchange(o.fd_, -1));
  return *this;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);  // close() is not retried on EINTR on Linux: the fd is gone either way
  fd_ = fd;
}

int pollTimeoutMs(Deadline d) {
  auto left = d - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

socklen_t addressLength(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return sizeof(sockaddr_in);
  if (ss.ss_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

std::string formatAddress(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(ss);
    inet_ntop(AF_INET, &in.sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in.sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(ss);
    inet_ntop(AF_INET6, &in6.sin6_addr, host, sizeof host);
    std::string out = "[";  // appended piecewise: GCC 12 -O3 misreports "lit" + string (-Wrestrict)
    out.append(host).append("]:").append(std::to_string(ntohs(in6.sin6_port)));
    return out;
  }
  return "<unknown address family " + std::to_string(ss.ss_family) + ">";
}

std::pair<std::string, uint16_t> splitHostPort(const std::string& text, const std::string& what) {
  auto bad = [&](const char* why) {
    return Error(Code::InvalidArgument,
                 what + "='" + text + "' is not a valid address (" + why + "; expected host:port or [v6]:port)");
  };
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') throw bad("bad brackets");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) throw bad("no port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string::npos) throw bad("IPv6 addresses need brackets");
  }
  if (host.empty()) throw bad("empty host");
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    throw bad("bad port");
  }
  unsigned long p = std::stoul(port);
  if (p == 0 || p > 65535) throw bad("port out of range");
  return {host, static_cast<uint16_t>(p)};
}

SockAddr resolveAddress(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    throw Error(Code::InvalidArgument, "bootstrap: cannot resolve host '" + host + "': " + gai_strerror(rc));
  }
  SockAddr out;
  std::memcpy(&out.storage, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  freeaddrinfo(res);
  return out;
}

bool isLoopback(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in&>(ss).sin_addr.s_addr) >> 24) == 127;
  }
  if (ss.ss_family == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr);
  }
  return false;
}

void makeNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) throwSystemError("bootstrap: fcntl(O_NONBLOCK)");
  if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) throwSystemError("bootstrap: fcntl(FD_CLOEXEC)");
}

Fd listenOn(const SockAddr& addr, int backlog) {
  Fd fd(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throwSystemError("bootstrap: socket");
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) != 0) {
    throwSystemError("bootstrap: cannot bind the store to " + formatAddress(addr.storage));
  }
  if (::listen(fd.get(), backlog) != 0) throwSystemError("bootstrap: listen on " + formatAddress(addr.storage));
  return fd;
}

int tryConnect(const SockAddr& addr, Deadline deadline, Fd* out, const SockAddr* source) {
  Fd fd(::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno;
  int one = 1;
  if (source != nullptr) {
    // The port is picked at connect time, per destination, so binding does not use up ephemeral ports.
    setsockopt(fd.get(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&source->storage), source->len) != 0) return errno;
  }
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) return errno;
    for (;;) {
      pollfd p{fd.get(), POLLOUT, 0};
      int n = ::poll(&p, 1, pollTimeoutMs(deadline));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno;
      if (n == 0) return ETIMEDOUT;
      break;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    if (err != 0) return err;
  }
  if (isSelfConnected(fd.get())) return ECONNREFUSED;  // nobody listens there: the caller retries
  *out = std::move(fd);
  return 0;
}

bool isSelfConnected(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t localLen = sizeof local, peerLen = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &localLen) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peerLen) != 0) return false;
  return localLen == peerLen && std::memcmp(&local, &peer, localLen) == 0;
}

namespace {

// Waits for @p events on @p fd until @p deadline; throws Timeout when it passes.
void waitFor(int fd, short events, Deadline deadline, const std::string& peer, const char* doing) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, pollTimeoutMs(deadline));
    if (n > 0) return;  // ready, or an error/hangup the following I/O call reports
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throwSystemError("bootstrap: poll");
    throw Error(Code::Timeout, std::string("bootstrap: timed out ") + doing + " " + peer);
  }
}

}  // namespace

void sendAll(int fd, const void* data, size_t n, Deadline deadline, const std::string& peer) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t r = ::send(fd, p, n, MSG_NOSIGNAL);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      waitFor(fd, POLLOUT, deadline, peer, "sending to");
    } else {
      throw Error(Code::RemoteError, systemErrorMessage("bootstrap: lost the connection to " + peer, errno));
    }
  }
}

void recvAll(int fd, void* data, size_t n, Deadline deadline, const std::string& peer) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
    } else if (r == 0) {
      throw Error(Code::RemoteError, "bootstrap: " + peer + " closed the connection");
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      waitFor(fd, POLLIN, deadline, peer, "waiting for data from");
    } else {
      throw Error(Code::RemoteError, systemErrorMessage("bootstrap: lost the connection to " + peer, errno));
    }
  }
}

}  // namespace conflux::bootstrap
