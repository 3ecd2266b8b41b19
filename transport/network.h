// conflux::transport::Network: a communicator's way to the ranks on other nodes, and the registry of the
// transports that provide one.
//
// A Network is a MessageTransport (transport.h: what the executor drives) plus what the communicator
// needs around the calls: a line saying what carries the messages, the identity of this rank's
// endpoints (the cost probe counts a node's distinct ones as its NICs), what to do with the buffers of a
// failed communicator, and, optionally, a view for a split child that shares the endpoints.
//
// Transports register in transport/registry.cc, one line each: a name (CONFLUX_NET) and the function
// that opens one. Adding a transport is a folder (its files and a CMakeLists.txt that links it into
// conflux_networks) and that line.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport/transport.h"

namespace conflux::transport {

/// What one rail (one endpoint on one NIC) moved: the metrics' per-NIC series.
struct RailTraffic {
  int rail = 0;
  std::string nic;
  uint64_t sentBytes = 0, receivedBytes = 0;
  uint64_t retries = 0;  ///< posts the provider refused for want of room, made again later
};

class Network : public MessageTransport {
 public:
  /// The transport's CONFLUX_NET name ("ofi", "tcp"): the `transport` label of the metrics.
  virtual std::string_view name() const = 0;
  /// One line for the init log: what carries the messages and why ("ofi provider tcp;ofi_rxm, rail
  /// domains lo (bound to 10.0.0.1) in tag space 0").
  virtual std::string describe() const = 0;
  /// The identity of this rank's endpoints (address and devices): ranks of a node with different keys
  /// drive different NICs.
  virtual std::string endpointKey() const = 0;
  /// The communicator using this network failed: operations of the failed call may still be posted
  /// into `buffers`, which the network keeps until none can touch them any more (closing the
  /// endpoints, or finishing the operations), and no later split child is given this view's messages.
  virtual void retire(std::shared_ptr<void> buffers) = 0;
  /// This rank's communicator failed with `s`: a network that can tells the ranks it is connected to,
  /// whose operations with this rank then fail with `s` (naming the rank at fault) instead of waiting for
  /// the timeout or a closed connection. Queued sends that have not started fail. Default: nothing.
  virtual void announceFailure(const Status& s) { (void)s; }
  /// Each rail's counters, read by a metrics scrape from any thread (default: none). A view shared by
  /// split children reports nothing: its rails' traffic counts under the communicator that opened them.
  virtual std::vector<RailTraffic> railTraffic() const { return {}; }
  /// A split child's view of this network: the child's ranks are `members` (ranks of this network, in
  /// the child's order) and this process is child rank `rank`. Collective over the members
  /// (`allGather` runs among them); null (the default) when this network cannot be shared, or not now:
  /// then the child opens a network of its own.
  virtual std::shared_ptr<Network> shareWith(const std::vector<int>& members, int rank, const BlobAllGather& allGather) {
    (void)members;
    (void)rank;
    (void)allGather;
    return nullptr;
  }
};

/// What opening a network needs from the communicator being made. Opening is collective: every rank of
/// the communicator calls it, with the same transport, in the same order.
struct NetOpenArgs {
  int rank = 0;
  int nranks = 1;
  int localRank = 0;
  std::vector<int> localRanks;  ///< the ranks of this rank's node, ascending
  BlobAllGather allGather;       ///< among every rank of the communicator
  BlobAllGather localAllGather;  ///< among the ranks of this node
  int timeoutMs = 30000;         ///< the communicator's timeout (connection set-up waits at most this)
};

/// One registered transport.
struct NetEntry {
  std::string_view name;  ///< CONFLUX_NET's value
  std::string_view what;  ///< one line, in the error for an unknown CONFLUX_NET
  std::shared_ptr<Network> (*open)(const NetOpenArgs&);
};

/// The transports of this build, in the order CONFLUX_NET=auto prefers them.
std::span<const NetEntry> networks();

/// Opens the network CONFLUX_NET names ("auto", the default: the first of networks()). Collective.
/// Throws Error(InvalidArgument) naming CONFLUX_NET for a name this build does not have, and whatever
/// the transport throws when it cannot open.
std::shared_ptr<Network> openNetwork(const NetOpenArgs& args);

}  // namespace conflux::transport
