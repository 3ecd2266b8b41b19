#include "plugin/net_handshake.h"

namespace conflux::plugin {
namespace {

/// Why a length of `n` read from a peer, for an array of `capacity` bytes, cannot be used ("" if it can).
std::string lengthOutside(const char* what, uint32_t n, size_t capacity) {
  if (n != 0 && n <= capacity) return {};
  return std::string("its ") + what + " length " + std::to_string(n) + " is outside 1.." + std::to_string(capacity);
}

std::string sizeDiffers(size_t received, size_t expected) {
  if (received == expected) return {};
  return "it has " + std::to_string(received) + " bytes, not " + std::to_string(expected);
}

std::string railsOutside(const RailAddresses& r) {
  if (r.count < 1 || r.count > uint32_t(kMaxRails)) {
    return "its rail count " + std::to_string(r.count) + " is outside 1.." + std::to_string(kMaxRails);
  }
  for (uint32_t m = 0; m < r.count; ++m) {
    if (std::string why = lengthOutside("data address", r.bytes[m], sizeof r.address[m]); !why.empty()) return why;
  }
  return {};
}

constexpr const char* kNotOurs = "its magic is not Conflux's (a peer of another Conflux version?)";

}  // namespace

std::string checkHandle(const ListenHandle& h) {
  if (h.magic != kHandleMagic) return "its magic is not Conflux's (a handle no Conflux listen wrote, or another version's)";
  return lengthOutside("address", h.addressBytes, sizeof h.address);
}

std::string checkConnect(const ConnectMessage& m, size_t received) {
  if (std::string why = sizeDiffers(received, sizeof m); !why.empty()) return why;
  if (m.magic != kHandleMagic) return kNotOurs;
  if (std::string why = lengthOutside("address", m.addressBytes, sizeof m.address); !why.empty()) return why;
  return railsOutside(m.data);
}

std::string checkAccept(const AcceptMessage& m, size_t received) {
  if (std::string why = sizeDiffers(received, sizeof m); !why.empty()) return why;
  if (m.magic != kHandleMagic) return kNotOurs;
  return railsOutside(m.data);
}

}  // namespace conflux::plugin
