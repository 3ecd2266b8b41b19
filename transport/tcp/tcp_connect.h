// The tcp transport's set-up: one connected socket per rank on another node (tcp_network.h says how).
#pragma once

#include <string>
#include <vector>

#include "core/bootstrap/socket.h"
#include "transport/network.h"

namespace conflux::tcp {

using bootstrap::Fd;

/// The sockets of one communicator.
struct Connections {
  std::vector<Fd> peers;       ///< by rank: a connected, non-blocking socket; none for ranks of this node
  std::string listenAddress;   ///< "address:port" this rank listened on
};

/// Listens, exchanges addresses over args.allGather and connects every pair of ranks on different nodes
/// (collective). A stranger's connection (no hello within 5 s, a wrong one, a duplicate) is dropped with a
/// warning. Throws Error(InvalidArgument) for a bad CONFLUX_TCP_ADDR, SystemError for a socket that cannot
/// be made, Timeout for a peer that does not connect within args.timeoutMs.
Connections connectAll(const transport::NetOpenArgs& args);

}  // namespace conflux::tcp
