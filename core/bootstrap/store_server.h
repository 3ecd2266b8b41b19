// The rendezvous store: a small authenticated TCP key-value store that ranks use to exchange addresses
// during communicator setup. One background thread serves every client with a poll() loop over
// non-blocking sockets, so one slow or hostile client never holds up the others.
//
// Limits (each refused with an error reply or a disconnect, never a crash or an unbounded allocation):
// keys <= 256 bytes, values <= 4 MiB, frames validated before allocation, at most 4096 connections,
// at most 256 MiB stored. A client that fails the handshake, sends garbage or stays silent during it is
// dropped and a warning naming its address is logged.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/bootstrap/socket.h"
#include "core/bootstrap/unique_id.h"

namespace conflux::bootstrap {

/// Tunables of a StoreServer; defaults suit production, tests shrink them.
struct StoreServerOptions {
  /// A client that has not completed authentication by then is dropped.
  std::chrono::milliseconds handshakeTimeout{5000};
  /// Connections beyond this are accepted and closed at once.
  size_t maxConnections = 4096;
  /// Sum of key and value bytes held.
  size_t maxStoredBytes = size_t{256} << 20;
};

/// A running rendezvous store. Destroying it stops the thread and closes every connection.
class StoreServer {
 public:
  /// Binds to @p bindHost ("127.0.0.1", "0.0.0.0", "::", an interface address, ...) and @p port
  /// (0 = ephemeral) and starts serving clients that prove knowledge of @p secret.
  /// Throws Error(SystemError) naming the address when it cannot bind.
  static std::shared_ptr<StoreServer> start(const std::string& bindHost, uint16_t port,
                                            const std::array<uint8_t, 32>& secret,
                                            const StoreServerOptions& options = StoreServerOptions());

  /// Starts serving, as start() does, on @p listening: a socket already bound and listening, which the
  /// server owns from now on (made non-blocking). Throws Error(SystemError).
  static std::shared_ptr<StoreServer> serveOn(Fd listening, const std::array<uint8_t, 32>& secret,
                                              const StoreServerOptions& options = StoreServerOptions());

  /// Starts a store for a new job on an ephemeral port with a fresh random secret, bound to
  /// pickBindHost(@p allLocal). Its uniqueId() is what cfxGetUniqueId hands out.
  static std::shared_ptr<StoreServer> startForNewJob(bool allLocal);

  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  /// The bound address (with the actual port when started with port 0).
  sockaddr_storage address() const;

  /// The id clients use to reach this store: address() and the secret. Throws Error(InvalidUsage) when
  /// bound to a wildcard address, which clients cannot connect to.
  UniqueId uniqueId() const;

  /// Number of open client connections (authenticated or not); for tests and diagnostics.
  size_t connectionCount() const;

  /// Number of keys stored; for tests and diagnostics.
  size_t keyCount() const;

  struct Impl;

 private:
  explicit StoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The address a new job's store should bind to: the first IPv4 (else IPv6) address of
/// CONFLUX_SOCKET_IFNAME when set (Error(InvalidArgument) if it has none); else "127.0.0.1" when
/// @p allLocal; else the first non-loopback IPv4 address of an interface that is up (then IPv6), falling
/// back to "127.0.0.1".
std::string pickBindHost(bool allLocal);

}  // namespace conflux::bootstrap
