// Helpers shared by both discovery paths; see discover_util.h.
#include "core/topology/discover_util.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace conflux::topo::detail {

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

double nicSpeedGbps(const std::string& rdmaDevice, const std::string& netdev) {
  if (!rdmaDevice.empty()) {
    // "100 Gb/sec (4X EDR)"
    std::string rate = readLine("/sys/class/infiniband/" + rdmaDevice + "/ports/1/rate");
    double gbps = std::strtod(rate.c_str(), nullptr);
    if (gbps > 0) return gbps;
  }
  if (!netdev.empty()) {
    // Mbit/s; -1 or unreadable for virtual devices and links that are down.
    double mbps = std::strtod(readLine("/sys/class/net/" + netdev + "/speed").c_str(), nullptr);
    if (mbps > 0) return mbps / 1000.0;
  }
  return 0;
}

bool looksLikeGpu(uint16_t vendorId, uint32_t classId) {
  return (classId >> 8) == 0x03 && (vendorId == 0x10de || vendorId == 0x1002);
}

void finishMachine(Machine& m) {
  std::sort(m.gpus.begin(), m.gpus.end(), [](const Gpu& a, const Gpu& b) { return a.pciBusId < b.pciBusId; });
  std::sort(m.nics.begin(), m.nics.end(), [](const Nic& a, const Nic& b) { return a.pciBusId < b.pciBusId; });
  std::sort(m.numa.begin(), m.numa.end(), [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  for (const Gpu& g : m.gpus) {
    int i = findPci(m, g.pciBusId);
    if (i >= 0) m.pci[static_cast<size_t>(i)].kind = PciKind::Gpu;
  }
  for (const Nic& n : m.nics) {
    int i = findPci(m, n.pciBusId);
    if (i >= 0) m.pci[static_cast<size_t>(i)].kind = PciKind::Nic;
  }
  if (m.cores < 1) m.cores = static_cast<int>(m.cpus.size());
  if (m.packages < 1) m.packages = 1;
  if (m.numaDistances.size() != m.numa.size()) {
    m.numaDistances.assign(m.numa.size(), std::vector<int>(m.numa.size(), 20));
    for (size_t i = 0; i < m.numa.size(); ++i) m.numaDistances[i][i] = 10;
  }
}

}  // namespace conflux::topo::detail
