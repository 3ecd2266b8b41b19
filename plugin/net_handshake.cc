#include "plugin/net_handshake.h"

namespace conflux::plugin {

std::string checkHandle(const ListenHandle& h) {
  if (h.magic != kHandleMagic) return "its magic is not Conflux's (a handle no Conflux listen wrote, or another version's)";
  if (h.addressBytes == 0 || h.addressBytes > sizeof h.address) {
    return "its address length " + std::to_string(h.addressBytes) + " is outside 1.." + std::to_string(sizeof h.address);
  }
  return {};
}

std::string checkConnect(const ConnectMessage& m, size_t received) {
  if (received != sizeof m) {
    return "it has " + std::to_string(received) + " bytes, not " + std::to_string(sizeof m);
  }
  if (m.magic != kHandleMagic) return "its magic is not Conflux's (a peer of another Conflux version?)";
  if (m.addressBytes == 0 || m.addressBytes > sizeof m.address) {
    return "its address length " + std::to_string(m.addressBytes) + " is outside 1.." + std::to_string(sizeof m.address);
  }
  if (m.dataAddressBytes == 0 || m.dataAddressBytes > sizeof m.dataAddress) {
    return "its data address length " + std::to_string(m.dataAddressBytes) + " is outside 1.." +
           std::to_string(sizeof m.dataAddress);
  }
  return {};
}

std::string checkAccept(const AcceptMessage& m, size_t received) {
  if (received != sizeof m) {
    return "it has " + std::to_string(received) + " bytes, not " + std::to_string(sizeof m);
  }
  if (m.magic != kHandleMagic) return "its magic is not Conflux's (a peer of another Conflux version?)";
  if (m.addressBytes == 0 || m.addressBytes > sizeof m.address) {
    return "its address length " + std::to_string(m.addressBytes) + " is outside 1.." + std::to_string(sizeof m.address);
  }
  return {};
}

}  // namespace conflux::plugin
