#include "transport/ofi/rail_domains.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "transport/ofi/fabric.h"
#include "transport/ofi/transport.h"
#if CONFLUX_HAVE_TOPOLOGY
#include "core/topology/discover.h"
#include "core/topology/nic_assignment.h"
#endif

namespace conflux::ofi {

using transport::BlobAllGather;

namespace {

// CPU lists travel as fixed-size records: a count and up to kMaxCpus indices.
constexpr size_t kMaxCpus = 1024;

std::vector<uint8_t> packCpus(const std::vector<int>& cpus) {
  std::vector<int32_t> rec(kMaxCpus + 1, -1);
  const size_t n = std::min(cpus.size(), kMaxCpus);
  rec[0] = int32_t(n);
  for (size_t i = 0; i < n; ++i) rec[i + 1] = cpus[i];
  std::vector<uint8_t> out(rec.size() * sizeof(int32_t));
  std::memcpy(out.data(), rec.data(), out.size());
  return out;
}

std::vector<int> unpackCpus(const uint8_t* blob) {
  std::vector<int32_t> rec(kMaxCpus + 1);
  std::memcpy(rec.data(), blob, rec.size() * sizeof(int32_t));
  const size_t n = std::min<size_t>(size_t(std::max(rec[0], 0)), kMaxCpus);
  return std::vector<int>(rec.begin() + 1, rec.begin() + 1 + long(n));
}

#if CONFLUX_HAVE_TOPOLOGY
// The machine does not change while the process runs: discover it (hwloc walks sysfs) once, not for every
// communicator; a different CONFLUX_TOPO_FILE is loaded anew.
topo::Machine cachedTopology() {
  static std::mutex mutex;
  static std::string loadedFrom;
  static std::optional<topo::Machine> machine;
  std::lock_guard<std::mutex> lock(mutex);
  const std::string file = config::getString(config::Var::TOPO_FILE);
  if (!machine || loadedFrom != file) {
    machine = topo::loadTopology();
    loadedFrom = file;
  }
  return *machine;
}

// This rank's domains by topology; every local rank computes the same assignment from the same inputs.
std::vector<std::string> nearestDomains(int localRank, const BlobAllGather& localAllGather, bool userChose) {
  const std::vector<uint8_t> mine = packCpus(topo::processCpus());
  const std::vector<uint8_t> all = localAllGather(mine);
  if (userChose) return {};
  std::vector<topo::RankLocality> ranks(all.size() / mine.size());
  for (size_t r = 0; r < ranks.size(); ++r) ranks[r].cpus = unpackCpus(all.data() + r * mine.size());
  try {
    topo::Machine m = cachedTopology();
    // A topology file may name the domains itself (fixtures); otherwise match the provider's by PCI id.
    const bool named = std::any_of(m.nics.begin(), m.nics.end(), [](const topo::Nic& n) { return !n.fabricDomain.empty(); });
    if (!named) {
      std::vector<topo::FabricDomain> domains;
      for (const DomainInfo& d : providerDomains("")) domains.push_back({d.name, d.pciBusId});
      topo::matchFabricDomains(m, domains);
    }
    const topo::NicAssignment a = topo::assignNics(m, ranks);
    return topo::rankFabricDomains(m, a, localRank);
  } catch (const Error& e) {
    CFX_WARN(kInit, "local rank %d: no NIC choice by topology (%s); the provider's first domain is used",
             localRank, e.what());
    return {};
  }
}
#endif

}  // namespace

std::vector<std::string> topologyRailDomains(int localRank, const BlobAllGather& localAllGather,
                                             const BlobAllGather& allGather) {
  // Every rank takes part in both exchanges, whatever it finds, so that none waits for another.
  const bool userChose = !config::getString(config::Var::OFI_DOMAINS).empty() ||
                         !config::getString(config::Var::OFI_ADDR).empty();
  std::vector<std::string> domains;
#if CONFLUX_HAVE_TOPOLOGY
  domains = nearestDomains(localRank, localAllGather, userChose);
#else
  (void)localAllGather;
  (void)userChose;
#endif
  if (domains.size() > size_t(kMaxRails)) {
    CFX_INFO(kInit, "local rank %d: %zu nearest NICs; using the first %d (most rails per rank)", localRank,
             domains.size(), kMaxRails);
    domains.resize(size_t(kMaxRails));
  }
  const uint32_t count = uint32_t(domains.size());
  uint32_t fewest = count;
  for (uint32_t c : transport::allGatherValues(allGather, count)) fewest = std::min(fewest, c);
  if (fewest < domains.size()) {
    CFX_INFO(kInit, "local rank %d: %zu nearest NICs, but some rank has only %u; using the first %u", localRank,
             domains.size(), fewest, fewest);
    domains.resize(fewest);
  }
  return domains;
}

}  // namespace conflux::ofi
