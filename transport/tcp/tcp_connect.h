// The tcp transport's set-up: one connected socket per rank on another node (tcp_network.h says how).
#pragma once

#include <string>
#include <vector>

#include "transport/network.h"

namespace conflux::tcp {

/// An owned file descriptor (-1: none), closed when it goes.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

/// The sockets of one communicator.
struct Connections {
  std::vector<Fd> peers;       ///< by rank: a connected, non-blocking socket; none for ranks of this node
  std::string listenAddress;   ///< "address:port" this rank listened on
};

/// Listens, exchanges addresses over args.allGather and connects every pair of ranks on different nodes
/// (collective). Throws Error(SystemError) for a socket that cannot be made, Timeout for a peer that does
/// not connect within args.timeoutMs, InvalidUsage for a stranger's connection.
Connections connectAll(const transport::NetOpenArgs& args);

}  // namespace conflux::tcp
