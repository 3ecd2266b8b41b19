// How this rank reaches each peer: a pure function of the ranks' host identities. The executor's links
// (src/peer_links.h) are made from it once per communicator: a rank of this node through the local
// group (transport/local_group.h, shared memory), any other through the network (transport/network.h,
// the transport CONFLUX_NET names).
#pragma once

#include <string>
#include <vector>

namespace conflux {

/// The kind of link to one peer.
enum class PeerTransport { Local, Network };

/// "local" or "network".
const char* peerTransportName(PeerTransport t);

/// Local when both ranks have the same host identity (core/host_id.h), else the network.
PeerTransport selectTransport(const std::string& selfHost, const std::string& peerHost);

/// The transport from @p rank to every rank (itself included, as local), given each rank's host identity.
/// Throws Error(InvalidArgument) when @p rank is out of range.
std::vector<PeerTransport> selectTransports(const std::vector<std::string>& hostIdPerRank, int rank);

}  // namespace conflux
