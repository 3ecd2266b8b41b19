// Socket plumbing for the bootstrap: an RAII file descriptor, deadlines, address parsing and
// formatting, and blocking-with-deadline connect/send/recv built on non-blocking sockets and poll().
// Every call handles EINTR and never raises SIGPIPE (MSG_NOSIGNAL).
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace conflux::bootstrap {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

/// Owns one file descriptor; closes it on destruction. Movable, not copyable.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  /// The descriptor, or -1.
  int get() const { return fd_; }
  /// True when a descriptor is held.
  bool valid() const { return fd_ >= 0; }
  /// Closes the descriptor (if any) and takes @p fd.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// Milliseconds left until @p d, rounded up, clamped to [0, INT_MAX]; for poll().
int pollTimeoutMs(Deadline d);

/// A resolved socket address.
struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
};

/// Length of a sockaddr of @p ss's family (sizeof sockaddr_in or sockaddr_in6; 0 for others).
socklen_t addressLength(const sockaddr_storage& ss);

/// "1.2.3.4:port" or "[::1]:port" for logs.
std::string formatAddress(const sockaddr_storage& ss);

/// Splits "host:port" or "[v6]:port"; throws Error(InvalidArgument) naming @p what on bad input.
std::pair<std::string, uint16_t> splitHostPort(const std::string& text, const std::string& what);

/// Resolves @p host (numeric or a name; no wildcard) and @p port; throws Error(InvalidArgument).
SockAddr resolveAddress(const std::string& host, uint16_t port);

/// True for 127.0.0.0/8 and ::1.
bool isLoopback(const sockaddr_storage& ss);

/// Sets O_NONBLOCK and FD_CLOEXEC; throws Error(SystemError).
void makeNonBlocking(int fd);

/// Creates a listening, non-blocking socket bound to @p addr (SO_REUSEADDR); throws Error(SystemError)
/// naming the address.
Fd listenOn(const SockAddr& addr, int backlog);

/// Starts a non-blocking connect and waits for it until @p deadline. Returns 0 and sets @p out on
/// success, otherwise the errno of the failure (ETIMEDOUT when the deadline passed). A socket that
/// connected to itself counts as refused (ECONNREFUSED): see isSelfConnected. With @p source the socket
/// is bound to that address first (IP_BIND_ADDRESS_NO_PORT: the port is still picked at connect), so
/// that its packets leave from it: on a host with a NIC per rank and a routing table per NIC, by that
/// NIC. A bind failure (an address not this host's: EADDRNOTAVAIL) is returned like a connect's.
int tryConnect(const SockAddr& addr, Deadline deadline, Fd* out, const SockAddr* source = nullptr);

/// Whether connected socket @p fd is connected to itself: its local and peer addresses are equal. On
/// loopback a connect to a port nobody listens on, in the ephemeral range, can pick that same port as its
/// source and "connect" by simultaneous open; a client retrying until its server listens would then talk
/// to its own echo.
bool isSelfConnected(int fd);

/// Sends all @p n bytes before @p deadline. Throws Error(Timeout) or Error(RemoteError) (connection
/// lost), messages naming @p peer.
void sendAll(int fd, const void* data, size_t n, Deadline deadline, const std::string& peer);

/// Receives exactly @p n bytes before @p deadline. Throws Error(Timeout), or Error(RemoteError) when the
/// peer closed the connection or it failed; messages naming @p peer.
void recvAll(int fd, void* data, size_t n, Deadline deadline, const std::string& peer);

}  // namespace conflux::bootstrap
