// The decoded form of cfxUniqueId: where the job's rendezvous store listens and the job's secret.
// The 128-byte encoding carries a magic and a version so that garbage or an id from another version is
// refused with a clear message instead of a hang.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>

#include "conflux/conflux.h"

namespace conflux::bootstrap {

/// The rendezvous store's address and the job secret that authenticates its clients.
struct UniqueId {
  sockaddr_storage addr{};  ///< AF_INET or AF_INET6 address of the store
  socklen_t addrLen = 0;    ///< length of the sockaddr in @ref addr
  std::array<uint8_t, 32> secret{};
};

/// Encodes @p id into the opaque 128-byte form. Throws Error(InvalidArgument) for an address family
/// other than IPv4/IPv6.
cfxUniqueId encode(const UniqueId& id);

/// Decodes an opaque id. Throws Error(InvalidArgument, "uniqueId: ...") on a bad magic, version or
/// address family.
UniqueId decode(const cfxUniqueId& raw);

/// 16 hex characters identifying the job (SHA-256 of a label and the secret), for naming shared-memory
/// segments; does not reveal the secret.
std::string jobTag(const UniqueId& id);

/// "ip:port" (or "[v6]:port") of the store, for logs and error messages.
std::string describe(const UniqueId& id);

}  // namespace conflux::bootstrap
