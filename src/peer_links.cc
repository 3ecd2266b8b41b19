// The executor's per-peer links; see peer_links.h.
#include "src/peer_links.h"

#include <string>

#include "core/error.h"

namespace conflux {

void linkPeers(ExecEnv& env, const std::vector<PeerTransport>& choice) {
  auto bad = [&](int g, const std::string& why) {
    throw Error(Code::InternalError, "rank " + std::to_string(env.rank) + ": no link to rank " + std::to_string(g) +
                                         ": " + why);
  };
  if (choice.size() != static_cast<size_t>(env.nranks) || env.localIndex.size() != choice.size()) {
    throw Error(Code::InternalError, "linkPeers: " + std::to_string(choice.size()) + " choices and " +
                                         std::to_string(env.localIndex.size()) + " local indices for " +
                                         std::to_string(env.nranks) + " ranks");
  }
  env.links.assign(choice.size(), PeerLink{});
  for (int g = 0; g < env.nranks; ++g) {
    if (g == env.rank) continue;
    PeerLink& link = env.links[static_cast<size_t>(g)];
    const int member = env.localIndex[static_cast<size_t>(g)];
    if (choice[static_cast<size_t>(g)] == PeerTransport::Local) {
      if (env.local == nullptr || member < 0 || member >= env.local->localSize()) bad(g, "it is not in this node's group");
      link.out = &env.local->sendTo(member);
      link.in = &env.local->recvFrom(member);
    } else {
      if (env.net == nullptr) bad(g, "it is on another node and there is no network");
      if (member >= 0) bad(g, "it is in this node's group but chosen for the network");
      link.via = PeerTransport::Network;
    }
  }
}

std::vector<PeerTransport> choiceFromLocalIndex(const std::vector<int>& localIndex) {
  std::vector<PeerTransport> out;
  out.reserve(localIndex.size());
  for (int l : localIndex) out.push_back(l >= 0 ? PeerTransport::Local : PeerTransport::Network);
  return out;
}

}  // namespace conflux
