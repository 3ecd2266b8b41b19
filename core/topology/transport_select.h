// Which transport carries traffic to each peer: a pure function of the ranks' host identities.
#pragma once

#include <string>
#include <vector>

namespace conflux::topo {

/// Transport for one peer.
enum class PeerTransport { Shm, Ofi };

/// "shm" or "ofi".
const char* peerTransportName(PeerTransport t);

/// Shared memory when both ranks have the same host identity (core/host_id.h), else ofi (libfabric).
PeerTransport selectTransport(const std::string& selfHost, const std::string& peerHost);

/// The transport from @p rank to every rank (itself included, as shm), given each rank's host identity.
/// Throws Error(InvalidArgument) when @p rank is out of range.
std::vector<PeerTransport> selectTransports(const std::vector<std::string>& hostIdPerRank, int rank);

}  // namespace conflux::topo
