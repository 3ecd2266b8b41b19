// Blocking loopback socket helpers for the fuzz targets that talk to a real store: bounded in time
// (poll with a timeout), never raising SIGPIPE, and carrying on through EINTR (libFuzzer's -timeout
// watchdog sends SIGALRM every few seconds, which interrupts whatever call is blocked).
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace conflux::fuzzsock {

/// Waits up to `ms` for `events` on `fd`; true when they (or an error, a hang-up) came.
inline bool ready(int fd, short events, int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    pollfd p{fd, events, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    const int n = ::poll(&p, 1, left.count() > 0 ? static_cast<int>(left.count()) : 0);
    if (n >= 0 || errno != EINTR) return n > 0;
  }
}

/// Waits up to `ms` for `fd` to be readable.
inline bool readable(int fd, int ms) { return ready(fd, POLLIN, ms); }

/// A connected TCP socket to `addr`, or -1. Closing it resets the connection (SO_LINGER 0) instead of
/// leaving it in TIME_WAIT: a target that connects thousands of times a second would otherwise run out
/// of loopback's ephemeral ports within a minute, and connects would fail or stall for seconds.
inline int connectTo(const sockaddr_storage& addr, socklen_t len) {
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const linger reset{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    // Interrupted, the connect goes on by itself: wait for it and read how it ended.
    int error = errno;
    socklen_t n = sizeof error;
    if (error != EINTR || !ready(fd, POLLOUT, 5000) || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &n) != 0 ||
        error != 0) {
      ::close(fd);
      errno = error;
      return -1;
    }
  }
  return fd;
}

/// Writes everything unless the peer is gone; false then.
inline bool writeAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}


/// Reads exactly `n` bytes, each wait bounded by `ms`; false on a close, an error or a timeout.
inline bool readExactly(int fd, void* data, size_t n, int ms) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    if (!readable(fd, ms)) return false;
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

/// Reads and drops what arrives until the peer closes or is quiet for `ms`.
inline void drain(int fd, int ms) {
  uint8_t buf[4096];
  while (readable(fd, ms)) {
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0 && !(r < 0 && errno == EINTR)) return;
  }
}

}  // namespace conflux::fuzzsock
