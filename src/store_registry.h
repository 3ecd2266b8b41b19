// Rendezvous stores started by cfxGetUniqueId in this process, kept alive until a communicator of this
// process claims one (and then until that communicator's init has finished), or until the process exits.
#pragma once

#include <memory>

#include "core/bootstrap/store_server.h"
#include "core/bootstrap/unique_id.h"

namespace conflux {

/// Starts a store on the address chosen by CONFLUX_SOCKET_IFNAME (default: loopback when @p allLocal, else
/// the first interface that is not loopback) and returns its id.
bootstrap::UniqueId startRendezvous(bool allLocal);

/// The store for `id` if this process started it (removed from the registry), else null.
std::shared_ptr<bootstrap::StoreServer> claimRendezvous(const bootstrap::UniqueId& id);

}  // namespace conflux
