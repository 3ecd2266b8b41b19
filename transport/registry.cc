// The transports that reach ranks on other nodes, one line each (network.h), and what every one shares.
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "transport/network.h"
#if CONFLUX_HAVE_OFI
#include "transport/ofi/comm_net.h"
#endif
#include "transport/tcp/tcp_network.h"

namespace conflux::transport {
namespace {

// In the order CONFLUX_NET=auto prefers them.
constexpr NetEntry kNetworks[] = {
#if CONFLUX_HAVE_OFI
    {"ofi", "libfabric: RDM endpoints, tagged messages, RMA writes, one rail per NIC (efa, tcp;ofi_rxm, ...)",
     ofi::openNetwork},
#endif
    {"tcp", "TCP sockets, one connection per pair of ranks on different nodes", tcp::openNetwork},
};

}  // namespace

std::span<const NetEntry> networks() { return kNetworks; }

std::shared_ptr<Network> openNetwork(const NetOpenArgs& args) {
  const std::string wanted = config::getString(config::Var::NET);
  std::string known;
  for (const NetEntry& e : kNetworks) {
    if (wanted.empty() || wanted == "auto" || wanted == e.name) return e.open(args);
    known += "; " + std::string(e.name) + " (" + std::string(e.what) + ")";
  }
  throw Error(Code::InvalidArgument, "CONFLUX_NET='" + wanted + "': this build has no such transport. It has auto (the first of these)" +
                                         known);
}

}  // namespace conflux::transport
