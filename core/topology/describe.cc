// Human summary of a Machine (conflux-info --topology); see topology.h.
#include <cstdio>
#include <string>

#include "core/topology/topology.h"

namespace conflux::topo {

namespace {

std::string pciPath(const Machine& m, const std::string& busId) {
  std::string path;
  for (int i = findPci(m, busId); i >= 0; i = m.pci[static_cast<size_t>(i)].parent) {
    path.insert(0, path.empty() ? m.pci[static_cast<size_t>(i)].id : m.pci[static_cast<size_t>(i)].id + " > ");
  }
  return path;
}

std::string numaName(int id) { return id < 0 ? "?" : std::to_string(id); }

}  // namespace

std::string describe(const Machine& m) {
  char buf[512];
  std::string out;
  std::snprintf(buf, sizeof buf, "host %s (%s): %d socket%s, %d cores, %zu CPUs (%s)\n", m.hostname.c_str(),
                m.source.c_str(), m.packages, m.packages == 1 ? "" : "s", m.cores, m.cpus.size(),
                formatCpuList(m.cpus).c_str());
  out += buf;
  for (size_t i = 0; i < m.numa.size(); ++i) {
    std::string dist;
    for (size_t j = 0; i < m.numaDistances.size() && j < m.numaDistances[i].size(); ++j) {
      if (j > 0) dist += ' ';
      dist += std::to_string(m.numaDistances[i][j]);
    }
    std::snprintf(buf, sizeof buf, "NUMA %d: CPUs %s, %.1f GiB, distances %s\n", m.numa[i].id,
                  formatCpuList(m.numa[i].cpus).c_str(), static_cast<double>(m.numa[i].memoryBytes) / (1 << 30),
                  dist.empty() ? "-" : dist.c_str());
    out += buf;
  }
  for (size_t i = 0; i < m.gpus.size(); ++i) {
    const Gpu& g = m.gpus[i];
    std::snprintf(buf, sizeof buf, "GPU %zu: %s, NUMA %s, PCI %s\n", i, g.name.c_str(), numaName(g.numaNode).c_str(),
                  pciPath(m, g.pciBusId).c_str());
    out += buf;
  }
  if (m.nics.empty()) out += "no NICs\n";
  for (size_t i = 0; i < m.nics.size(); ++i) {
    const Nic& n = m.nics[i];
    std::snprintf(buf, sizeof buf, "NIC %zu: %s (%s%s%s), %g Gbit/s, NUMA %s, PCI %s\n", i, n.name.c_str(),
                  n.rdma ? "rdma" : "netdev", n.fabricDomain.empty() ? "" : ", domain ", n.fabricDomain.c_str(),
                  n.speedGbps, numaName(n.numaNode).c_str(), pciPath(m, n.pciBusId).c_str());
    out += buf;
  }
  return out;
}

}  // namespace conflux::topo
