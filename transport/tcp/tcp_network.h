// conflux::tcp: a transport::Network over TCP sockets, for ranks on other nodes where libfabric is not
// built in or not wanted (CONFLUX_NET=tcp).
//
// Set-up (collective): every rank listens on an ephemeral port of CONFLUX_TCP_ADDR (else
// CONFLUX_SOCKET_IFNAME's address, else the first non-loopback one); the addresses travel through the
// communicator's all-gather; of each pair of ranks on different nodes the lower connects, says hello
// (magic, its rank) and the higher accepts, all within the communicator's timeout. Ranks of one node
// are not connected: they talk through shared memory.
//
// Messages: a 16-byte header (tag, size) and the payload, in posting order per pair. Receives match by
// (peer, tag) in the order they were posted; a message that arrives before its receive is kept
// (unexpected) until one is posted. Non-blocking sockets, TCP_NODELAY; progress() moves what the
// sockets take without blocking, poll() sleeps in ppoll(2). A connection that breaks fails every
// operation with that peer, naming it; a message whose size differs from its receive's fails that
// receive. A failure notice from a peer (announceFailure) fails every operation, with every peer. Not thread-safe (a communicator drives its network from one thread at a time) and not
// shared with split children (they open their own).
#pragma once

#include <memory>

#include "transport/network.h"

namespace conflux::tcp {

/// Opens the sockets for the communicator `args` describes (transport/registry.cc registers it as
/// "tcp"). Throws Error(SystemError) when a socket cannot be made, Timeout when a peer does not connect.
std::shared_ptr<transport::Network> openNetwork(const transport::NetOpenArgs& args);

}  // namespace conflux::tcp
