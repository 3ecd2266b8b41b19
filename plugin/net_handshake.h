// The checks on what the connection handshake receives from outside the process (net_comm.h has the
// layouts): the listen handle NCCL hands connect (written by a listen in another process, perhaps of
// another build) and the CONNECT and ACCEPT messages a peer sends. Each says why the bytes cannot be
// used, so that nothing from them is trusted (address lengths, above all) before it passed.
#pragma once

#include <cstddef>
#include <string>

#include "plugin/net_comm.h"

namespace conflux::plugin {

/// "" when `h` is a handle a Conflux listen of this layout wrote; else why not.
std::string checkHandle(const ListenHandle& h);
/// "" when the CONNECT message `m`, of which `received` bytes arrived, can be used; else why not.
std::string checkConnect(const ConnectMessage& m, size_t received);
/// "" when the ACCEPT message `m`, of which `received` bytes arrived, can be used; else why not.
std::string checkAccept(const AcceptMessage& m, size_t received);

}  // namespace conflux::plugin
