// Multi-rail NIC assignment; see nic_assignment.h.
//
// The rule, in two steps:
//  1. Nearest NICs. For a rank with a GPU, the distance to a NIC is (PCI hops between the GPU and the NIC,
//     then the NUMA distance between them); for a rank without one, it is the smallest NUMA distance from
//     a NUMA node holding one of the rank's CPUs to the NIC's node (every NIC when the rank may run
//     anywhere). A rank's nearest set is every rail NIC at the smallest distance.
//  2. Fair spreading. Ranks with the same nearest set form a group of k ranks over n NICs, taken in rank
//     order. If k <= n, the NICs are cut into k contiguous blocks whose sizes differ by at most one and
//     rank j of the group gets block j (p5-like: one rank per GPU gets the 4 NICs of its switch). If
//     k > n, rank j gets NIC j mod n, so every NIC carries k/n ranks, rounded up or down (p4d-like: the
//     2 GPUs behind a switch share its NIC).
// Ranks never take a farther NIC to balance load: locality first, fairness among equals.
#include "core/topology/nic_assignment.h"

#include <algorithm>
#include <climits>
#include <map>
#include <utility>

#include "core/error.h"

namespace conflux::topo {

namespace {

using Distance = std::pair<int, int>;  // (PCI hops, NUMA distance), compared in that order

Distance distance(const Machine& m, const RankLocality& r, const std::vector<int>& rankNuma, const Nic& nic) {
  if (r.gpu >= 0) {
    const Gpu& g = m.gpus[static_cast<size_t>(r.gpu)];
    return {pciDistance(m, g.pciBusId, nic.pciBusId), numaDistance(m, g.numaNode, nic.numaNode)};
  }
  int best = rankNuma.empty() ? numaDistance(m, -1, nic.numaNode) : INT_MAX;
  for (int node : rankNuma) best = std::min(best, numaDistance(m, node, nic.numaNode));
  return {0, best};
}

}  // namespace

std::vector<int> railNics(const Machine& m) {
  auto pick = [&](auto pred) {
    std::vector<int> out;
    for (size_t i = 0; i < m.nics.size(); ++i) {
      if (pred(m.nics[i])) out.push_back(static_cast<int>(i));
    }
    return out;
  };
  std::vector<int> out = pick([](const Nic& n) { return !n.fabricDomain.empty(); });
  if (out.empty()) out = pick([](const Nic& n) { return n.rdma; });
  if (out.empty()) out = pick([](const Nic&) { return true; });
  return out;
}

NicAssignment assignNics(const Machine& m, const std::vector<RankLocality>& ranks) {
  NicAssignment a;
  a.railNics = railNics(m);
  a.rankRails.resize(ranks.size());
  if (a.railNics.empty()) return a;

  // Step 1: each rank's nearest rails; ranks with the same set form a group (in rank order).
  std::map<std::vector<int>, std::vector<size_t>> groups;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankLocality& loc = ranks[r];
    if (loc.gpu < -1 || loc.gpu >= static_cast<int>(m.gpus.size())) {
      throw Error(Code::InvalidArgument, "assignNics: local rank " + std::to_string(r) + " has GPU " +
                                             std::to_string(loc.gpu) + " but the machine has " +
                                             std::to_string(m.gpus.size()) + " GPUs");
    }
    std::vector<int> rankNuma = numaNodesOfCpus(m, loc.cpus);
    Distance best{INT_MAX, INT_MAX};
    std::vector<int> nearest;
    for (size_t rail = 0; rail < a.railNics.size(); ++rail) {
      Distance d = distance(m, loc, rankNuma, m.nics[static_cast<size_t>(a.railNics[rail])]);
      if (d < best) {
        best = d;
        nearest.clear();
      }
      if (d == best) nearest.push_back(static_cast<int>(rail));
    }
    groups[nearest].push_back(r);
  }

  // Step 2: spread each group's ranks over its NICs.
  for (const auto& [nics, members] : groups) {
    size_t n = nics.size(), k = members.size();
    for (size_t j = 0; j < k; ++j) {
      std::vector<int>& out = a.rankRails[members[j]];
      if (k <= n) {
        out.assign(nics.begin() + static_cast<std::ptrdiff_t>(j * n / k),
                   nics.begin() + static_cast<std::ptrdiff_t>((j + 1) * n / k));
      } else {
        out.push_back(nics[j % n]);
      }
    }
  }
  return a;
}

std::vector<std::string> rankFabricDomains(const Machine& m, const NicAssignment& a, int localRank) {
  std::vector<std::string> out;
  if (localRank < 0 || static_cast<size_t>(localRank) >= a.rankRails.size()) return out;
  for (int rail : a.rankRails[static_cast<size_t>(localRank)]) {
    const Nic& nic = m.nics.at(static_cast<size_t>(a.railNics.at(static_cast<size_t>(rail))));
    if (!nic.fabricDomain.empty()) out.push_back(nic.fabricDomain);
  }
  return out;
}

std::vector<std::vector<int>> ranksPerRail(const NicAssignment& a) {
  std::vector<std::vector<int>> out(a.railNics.size());
  for (size_t r = 0; r < a.rankRails.size(); ++r) {
    for (int rail : a.rankRails[r]) out.at(static_cast<size_t>(rail)).push_back(static_cast<int>(r));
  }
  return out;
}

std::vector<RankLocality> defaultLocalities(const Machine& m, int localSize) {
  std::vector<RankLocality> out(static_cast<size_t>(std::max(localSize, 0)));
  for (size_t i = 0; i < out.size(); ++i) {
    if (!m.gpus.empty()) {
      out[i].gpu = static_cast<int>(i % m.gpus.size());
    } else if (!m.numa.empty()) {
      out[i].cpus = m.numa[i * m.numa.size() / out.size()].cpus;
    }
  }
  return out;
}

}  // namespace conflux::topo
