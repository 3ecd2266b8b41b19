// The executor's links to the other ranks, made once per communicator from the per-peer choice
// (core/transport_select.h).
#pragma once

#include <vector>

#include "core/transport_select.h"
#include "src/executor.h"

namespace conflux {

/// Fills env.links by global rank from `choice` (selectTransports for this rank): a Local rank
/// through env.local's streams (env.localIndex says which member it is), a Network rank through env.net.
/// Throws Error(InternalError) when a choice cannot be met (a Local rank that is not a member of the
/// group, a Network rank with no network), which would be a set-up bug: the caller made the group and
/// the network from the same host identities.
void linkPeers(ExecEnv& env, const std::vector<PeerTransport>& choice);

/// The choice for a communicator whose ranks are split into nodes by `localIndex` (global rank -> member
/// index, -1 for ranks on other nodes): what tests and benchmarks that build an ExecEnv by hand pass to
/// linkPeers (communicators pass selectTransports' choice).
std::vector<PeerTransport> choiceFromLocalIndex(const std::vector<int>& localIndex);

}  // namespace conflux
