// Discovery from /sys alone: the fallback when the build has no hwloc (and a cross-check of it).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/topology/discover.h"
#include "core/topology/discover_util.h"

namespace conflux::topo {

namespace {

namespace fs = std::filesystem;
using detail::readLine;

const char* const kPciDevices = "/sys/bus/pci/devices/";

bool isBusId(const std::string& s) {
  try {
    return normalizeBusId(s) == s;
  } catch (const Error&) {
    return false;
  }
}

unsigned readHex(const std::string& path) { return static_cast<unsigned>(std::strtoul(readLine(path).c_str(), nullptr, 16)); }

// PCIe link bandwidth in GB/s from "8.0 GT/s PCIe" and a lane count (8b/10b below 8 GT/s, else 128b/130b).
double linkGBps(const std::string& busId) {
  double gts = std::strtod(readLine(kPciDevices + busId + "/current_link_speed").c_str(), nullptr);
  double width = std::strtod(readLine(kPciDevices + busId + "/current_link_width").c_str(), nullptr);
  if (gts <= 0 || width <= 0) return 0;
  return gts * width * (gts >= 8 ? 128.0 / 130.0 : 0.8) / 8.0;
}

// Adds the PCI path of a sysfs device (e.g. /sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0) to the
// tree and returns the bus id of the deepest PCI function on it, or "" when it is not on PCI.
std::string addPciPath(Machine& m, const fs::path& device) {
  std::error_code ec;
  fs::path real = fs::canonical(device, ec);
  if (ec) return "";
  int current = -1;
  std::string last;
  for (const fs::path& part : real) {
    std::string name = part.string();
    bool root = name.rfind("pci", 0) == 0 && name.size() > 3 && name.find(':') != std::string::npos;
    if (!root && !isBusId(name)) continue;
    int i = findPci(m, name);
    if (i < 0) {
      PciNode n;
      n.id = name;
      n.parent = root ? -1 : current;
      n.kind = root ? PciKind::HostBridge : PciKind::Other;
      if (!root) {
        n.vendorId = static_cast<uint16_t>(readHex(kPciDevices + name + "/vendor"));
        n.deviceId = static_cast<uint16_t>(readHex(kPciDevices + name + "/device"));
        n.classId = readHex(kPciDevices + name + "/class") >> 8;
        n.linkGBps = linkGBps(name);
        if ((n.classId >> 8) == 0x06 && n.classId != 0x0600) n.kind = PciKind::Bridge;
      }
      m.pci.push_back(n);
      i = static_cast<int>(m.pci.size()) - 1;
    }
    current = i;
    if (!root) last = name;
  }
  return last;
}

int deviceNuma(const Machine& m, const std::string& busId) {
  std::string text = readLine(kPciDevices + busId + "/numa_node");
  int node = text.empty() ? -1 : std::atoi(text.c_str());
  if (node < 0 && m.numa.size() == 1) node = m.numa.front().id;
  return node;
}

std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

void readCpusAndNuma(Machine& m) {
  const std::string sys = "/sys/devices/system/";
  try {
    m.cpus = parseCpuList(readLine(sys + "cpu/online"));
  } catch (const Error&) {
    m.cpus.clear();
  }
  if (m.cpus.empty()) m.cpus = processCpus();
  if (m.cpus.empty()) {
    for (unsigned c = 0; c < std::max(1u, std::thread::hardware_concurrency()); ++c) m.cpus.push_back(static_cast<int>(c));
  }
  std::set<std::pair<int, int>> cores;
  std::set<int> packages;
  for (int c : m.cpus) {
    std::string dir = sys + "cpu/cpu" + std::to_string(c) + "/topology/";
    int pkg = std::atoi(readLine(dir + "physical_package_id").c_str());
    std::string core = readLine(dir + "core_id");
    packages.insert(pkg);
    cores.insert({pkg, core.empty() ? c : std::atoi(core.c_str())});
  }
  m.cores = static_cast<int>(cores.size());
  m.packages = static_cast<int>(packages.size());

  std::vector<int> online;
  try {
    online = parseCpuList(readLine(sys + "node/online"));
  } catch (const Error&) {
  }
  for (int id : online) {
    std::string dir = sys + "node/node" + std::to_string(id) + "/";
    NumaNode n{id, {}, 0};
    try {
      for (int c : parseCpuList(readLine(dir + "cpulist"))) {
        if (std::binary_search(m.cpus.begin(), m.cpus.end(), c)) n.cpus.push_back(c);
      }
    } catch (const Error&) {
    }
    std::ifstream meminfo(dir + "meminfo");
    for (std::string line; std::getline(meminfo, line);) {
      size_t at = line.find("MemTotal:");
      if (at != std::string::npos) n.memoryBytes = std::strtoull(line.c_str() + at + 9, nullptr, 10) * 1024;
    }
    std::istringstream row(readLine(dir + "distance"));
    m.numaDistances.emplace_back();
    for (int d; row >> d;) m.numaDistances.back().push_back(d);
    m.numa.push_back(n);
  }
  if (m.numa.empty()) {
    m.numa.push_back({0, m.cpus, 0});
    m.numaDistances.clear();
  }
}

}  // namespace

Machine discoverSysfs() {
  Machine m;
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) m.hostname = host;
  m.source = "sysfs";
  readCpusAndNuma(m);

  for (const std::string& bus : listDir(kPciDevices)) {
    uint16_t vendor = static_cast<uint16_t>(readHex(kPciDevices + bus + "/vendor"));
    uint16_t device = static_cast<uint16_t>(readHex(kPciDevices + bus + "/device"));
    if (!detail::looksLikeGpu(vendor, readHex(kPciDevices + bus + "/class") >> 8)) continue;
    std::string id = addPciPath(m, kPciDevices + bus);
    char name[32];
    std::snprintf(name, sizeof name, "PCI %04x:%04x", vendor, device);
    if (!id.empty()) m.gpus.push_back({name, id, deviceNuma(m, id)});
  }
  for (const std::string& netdev : listDir("/sys/class/net")) {
    std::string id = addPciPath(m, "/sys/class/net/" + netdev + "/device");
    bool known = std::any_of(m.nics.begin(), m.nics.end(), [&](const Nic& n) { return n.pciBusId == id; });
    if (!id.empty() && !known) m.nics.push_back({netdev, id, detail::nicSpeedGbps("", netdev), deviceNuma(m, id), false, ""});
  }
  for (const std::string& rdma : listDir("/sys/class/infiniband")) {
    std::string id = addPciPath(m, "/sys/class/infiniband/" + rdma + "/device");
    if (id.empty()) continue;
    auto it = std::find_if(m.nics.begin(), m.nics.end(), [&](const Nic& n) { return n.pciBusId == id; });
    if (it == m.nics.end()) {
      m.nics.push_back({rdma, id, detail::nicSpeedGbps(rdma, ""), deviceNuma(m, id), true, ""});
    } else if (!it->rdma) {
      it->speedGbps = detail::nicSpeedGbps(rdma, it->name);
      it->name = rdma;
      it->rdma = true;
    }
  }
  detail::finishMachine(m);
  return m;
}

}  // namespace conflux::topo
