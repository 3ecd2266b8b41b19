// Encoding of cfxUniqueId; see unique_id.h.
//
// Layout (big-endian): 0 magic "CFXU" | 4 version | 5 family (4 or 6) | 6 port | 8 address (16 bytes,
// IPv4 in the first 4) | 24 IPv6 scope id | 28 secret (32 bytes) | 60.. zero.
#include "core/bootstrap/unique_id.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "core/bootstrap/crypto.h"
#include "core/bootstrap/socket.h"
#include "core/error.h"

namespace conflux::bootstrap {
namespace {

constexpr uint8_t kMagic[4] = {'C', 'F', 'X', 'U'};
constexpr uint8_t kVersion = 1;
constexpr size_t kOffVersion = 4, kOffFamily = 5, kOffPort = 6, kOffAddr = 8, kOffScope = 24, kOffSecret = 28;

}  // namespace

cfxUniqueId encode(const UniqueId& id) {
  cfxUniqueId raw;
  std::memset(&raw, 0, sizeof raw);
  auto* p = reinterpret_cast<uint8_t*>(raw.internal);
  std::memcpy(p, kMagic, sizeof kMagic);
  p[kOffVersion] = kVersion;
  uint16_t port = 0;
  uint32_t scope = 0;
  if (id.addr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(id.addr);
    p[kOffFamily] = 4;
    port = in.sin_port;
    std::memcpy(p + kOffAddr, &in.sin_addr, 4);
  } else if (id.addr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(id.addr);
    p[kOffFamily] = 6;
    port = in6.sin6_port;
    scope = htonl(in6.sin6_scope_id);
    std::memcpy(p + kOffAddr, &in6.sin6_addr, 16);
  } else {
    throw Error(Code::InvalidArgument,
                "uniqueId: unsupported address family " + std::to_string(id.addr.ss_family));
  }
  std::memcpy(p + kOffPort, &port, 2);  // already network order
  std::memcpy(p + kOffScope, &scope, 4);
  std::memcpy(p + kOffSecret, id.secret.data(), id.secret.size());
  return raw;
}

UniqueId decode(const cfxUniqueId& raw) {
  const auto* p = reinterpret_cast<const uint8_t*>(raw.internal);
  if (std::memcmp(p, kMagic, sizeof kMagic) != 0) {
    throw Error(Code::InvalidArgument,
                "uniqueId: bad magic (not an id made by cfxGetUniqueId, or corrupted in transit)");
  }
  if (p[kOffVersion] != kVersion) {
    throw Error(Code::InvalidArgument, "uniqueId: version " + std::to_string(p[kOffVersion]) +
                                           " made by another Conflux release (this one reads version " +
                                           std::to_string(kVersion) + ")");
  }
  UniqueId id;
  uint16_t port;
  std::memcpy(&port, p + kOffPort, 2);
  if (p[kOffFamily] == 4) {
    auto& in = reinterpret_cast<sockaddr_in&>(id.addr);
    in.sin_family = AF_INET;
    in.sin_port = port;
    std::memcpy(&in.sin_addr, p + kOffAddr, 4);
    id.addrLen = sizeof(sockaddr_in);
  } else if (p[kOffFamily] == 6) {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(id.addr);
    in6.sin6_family = AF_INET6;
    in6.sin6_port = port;
    std::memcpy(&in6.sin6_addr, p + kOffAddr, 16);
    uint32_t scope;
    std::memcpy(&scope, p + kOffScope, 4);
    in6.sin6_scope_id = ntohl(scope);
    id.addrLen = sizeof(sockaddr_in6);
  } else {
    throw Error(Code::InvalidArgument, "uniqueId: bad address family " + std::to_string(p[kOffFamily]));
  }
  std::memcpy(id.secret.data(), p + kOffSecret, id.secret.size());
  return id;
}

std::string jobTag(const UniqueId& id) {
  Digest d = Sha256().update("conflux-shm-tag").update(id.secret.data(), id.secret.size()).finish();
  return toHex(d.data(), 8);
}

std::string describe(const UniqueId& id) { return formatAddress(id.addr); }

}  // namespace conflux::bootstrap
