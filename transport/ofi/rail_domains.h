// Which libfabric domains (NICs) a rank's inter-node endpoints use: the NICs nearest to it by PCI distance
// (core/topology/nic_assignment.h), unless the user chose (CONFLUX_OFI_DOMAINS, CONFLUX_OFI_ADDR).
#pragma once

#include <string>
#include <vector>

#include "transport/transport.h"

namespace conflux::ofi {

/// The domains for ofi::Options::domains, the same number on every rank (the smallest any rank has, so
/// that rails pair up). Collective: every rank of the communicator calls it, in the same order.
/// Empty when the user chose (CONFLUX_OFI_DOMAINS or CONFLUX_OFI_ADDR set), when this build has no
/// topology module, or when no NIC of the topology carries a domain of the provider (virtual interfaces,
/// providers that give no PCI address); the transport then opens the provider's first domain.
/// @p localAllGather runs among the ranks of this node (their CPU affinities decide the assignment), @p
/// allGather among all ranks. Failures to discover are logged and give an empty list.
std::vector<std::string> topologyRailDomains(int localRank, const transport::BlobAllGather& localAllGather,
                                             const transport::BlobAllGather& allGather);

}  // namespace conflux::ofi
