// Transport per peer; see transport_select.h.
#include "core/transport_select.h"

#include "core/error.h"

namespace conflux {

const char* peerTransportName(PeerTransport t) { return t == PeerTransport::Local ? "local" : "network"; }

PeerTransport selectTransport(const std::string& selfHost, const std::string& peerHost) {
  return selfHost == peerHost ? PeerTransport::Local : PeerTransport::Network;
}

std::vector<PeerTransport> selectTransports(const std::vector<std::string>& hostIdPerRank, int rank) {
  if (rank < 0 || static_cast<size_t>(rank) >= hostIdPerRank.size()) {
    throw Error(Code::InvalidArgument, "selectTransports: rank " + std::to_string(rank) + " is not in [0, " +
                                           std::to_string(hostIdPerRank.size()) + ")");
  }
  std::vector<PeerTransport> out;
  out.reserve(hostIdPerRank.size());
  for (const std::string& peer : hostIdPerRank) out.push_back(selectTransport(hostIdPerRank[static_cast<size_t>(rank)], peer));
  return out;
}

}  // namespace conflux
