// CommNet as a transport::Network: how a communicator opens libfabric endpoints, what it logs of them, and
// how a split child shares them (comm_net.h).
#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "core/bootstrap/crypto.h"
#include "core/bootstrap/store_server.h"
#include "core/config.h"
#include "core/log.h"
#include "transport/ofi/comm_net.h"
#include "transport/ofi/rail_domains.h"

namespace conflux::ofi {
namespace {

/// The lowest tag space set in `mask` (0: none; space 0 is never a child's).
uint32_t lowestSpace(uint32_t mask) {
  mask &= ~uint32_t{1};
  return mask == 0 ? 0 : static_cast<uint32_t>(std::countr_zero(mask));
}

uint64_t randomNonce() {
  const std::vector<uint8_t> bytes = bootstrap::randomBytes(sizeof(uint64_t));
  uint64_t v = 0;
  std::memcpy(&v, bytes.data(), sizeof v);
  return v;
}

std::string railList(const Capabilities& caps) {
  std::string rails;
  for (const std::string& d : caps.railDomains) rails += (rails.empty() ? "" : ",") + d;
  return rails;
}

std::string describeView(const CommNet& net, const std::string& why) {
  return "ofi provider " + net.capabilities().provider + ", rail domains " + railList(net.capabilities()) + " (" +
         why + ") in tag space " + std::to_string(net.space());
}

}  // namespace

std::shared_ptr<transport::Network> openNetwork(const transport::NetOpenArgs& args) {
  Options o;
  o.rank = args.rank;
  o.nranks = args.nranks;
  // Bind to the bootstrap interface when one is named (CONFLUX_SOCKET_IFNAME) and no address is set:
  // without it tcp providers may pick an interface the other nodes cannot reach.
  if (config::getString(config::Var::OFI_ADDR).empty() && !config::getString(config::Var::SOCKET_IFNAME).empty()) {
    o.localAddress = bootstrap::pickBindHost(false);
  }
  // The NICs nearest this rank, when the topology knows them (they override the bind address).
  o.domains = topologyRailDomains(args.localRank, args.localAllGather, args.allGather);
  auto net = std::make_shared<CommNet>(Transport::create(o, args.allGather));
  const std::string why = !o.domains.empty()                                         ? "nearest NICs by topology"
                          : !config::getString(config::Var::OFI_DOMAINS).empty() ? "CONFLUX_OFI_DOMAINS"
                          : !o.localAddress.empty()                               ? "bound to " + o.localAddress
                                                                                  : "the provider's first domain";
  net->setIdentity(describeView(*net, why), railList(net->capabilities()) + "@" + o.localAddress);
  std::vector<int> otherNodes;
  for (int r = 0; r < args.nranks; ++r) {
    if (std::find(args.localRanks.begin(), args.localRanks.end(), r) == args.localRanks.end()) otherNodes.push_back(r);
  }
  net->listenForNotices(otherNodes);
  return net;
}

void CommNet::retire(std::shared_ptr<void> buffers) {
  if (space_ != 0) retireSpace();
  transport_->keepFailedUntilClosed(std::move(buffers));
}

std::shared_ptr<transport::Network> CommNet::shareWith(const std::vector<int>& members, int rank,
                                                       const transport::BlobAllGather& allGather) {
  struct Offer {
    uint32_t spaces;
    uint32_t unused;
    uint64_t nonce;  // member 0's becomes the view's notice id
  };
  const uint32_t offered = transport_->takeFreeSpaces();
  uint32_t space = 0;
  std::shared_ptr<CommNet> view;
  try {
    const std::vector<Offer> offers = transport::allGatherValues(allGather, Offer{offered, 0, randomNonce()});
    uint32_t common = offered;
    for (const Offer& theirs : offers) common &= theirs.spaces;  // every member's
    space = lowestSpace(common);
    if (space != 0) {
      view = std::make_shared<CommNet>(*this, members, rank, space);
      view->shareNotices(*this, offers.empty() ? 1 : offers[0].nonce | 1);  // never the opener's 0
    }
  } catch (...) {
    transport_->releaseSpaces(offered);
    throw;
  }
  transport_->releaseSpaces(space != 0 ? offered & ~(uint32_t{1} << space) : offered);
  if (view == nullptr) {
    CFX_INFO(kInit, "rank %d: split child opens network endpoints of its own (%s)", rank,
             offered == 0 ? "none free here" : "no tag space of the parent's is free on every member");
    return nullptr;
  }
  view->setIdentity(describeView(*view, "the split parent's endpoints"), endpointKey_);
  return view;
}

}  // namespace conflux::ofi
