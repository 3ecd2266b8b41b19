// Queries and invariants of the topology model; see topology.h.
#include "core/topology/topology.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "core/error.h"

namespace conflux::topo {

namespace {

[[noreturn]] void invalid(const std::string& what, const std::string& field, const std::string& problem) {
  throw Error(Code::InvalidArgument, what + ": field '" + field + "': " + problem);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Ancestor chain of node @p i: i, its parent, ..., its host bridge.
std::vector<int> chain(const Machine& m, int i) {
  std::vector<int> out;
  for (; i >= 0; i = m.pci[static_cast<size_t>(i)].parent) out.push_back(i);
  return out;
}

int indexOrThrow(const Machine& m, const std::string& id) {
  int i = findPci(m, id);
  if (i < 0) throw Error(Code::InvalidArgument, "pciDistance: '" + id + "' is not in the PCI tree");
  return i;
}

}  // namespace

const char* pciKindName(PciKind kind) {
  switch (kind) {
    case PciKind::HostBridge: return "hostbridge";
    case PciKind::Bridge: return "bridge";
    case PciKind::Gpu: return "gpu";
    case PciKind::Nic: return "nic";
    case PciKind::Other: return "other";
  }
  return "other";
}

bool parsePciKind(const std::string& name, PciKind* kind) {
  for (PciKind k : {PciKind::HostBridge, PciKind::Bridge, PciKind::Gpu, PciKind::Nic, PciKind::Other}) {
    if (name == pciKindName(k)) {
      *kind = k;
      return true;
    }
  }
  return false;
}

std::string normalizeBusId(const std::string& busId) {
  unsigned domain = 0, bus = 0, dev = 0, func = 0;
  int used = 0;
  std::string s = lower(busId);
  bool ok = std::sscanf(s.c_str(), "%x:%x:%x.%x%n", &domain, &bus, &dev, &func, &used) == 4 &&
            static_cast<size_t>(used) == s.size();
  if (!ok) {
    domain = 0;
    ok = std::sscanf(s.c_str(), "%x:%x.%x%n", &bus, &dev, &func, &used) == 3 && static_cast<size_t>(used) == s.size();
  }
  if (!ok || s.find_first_of(" +-") != std::string::npos || domain > 0xffff || bus > 0xff || dev > 0x1f ||
      func > 7) {
    throw Error(Code::InvalidArgument, "'" + busId + "' is not a PCI bus id (expected dddd:bb:dd.f)");
  }
  char out[16];
  std::snprintf(out, sizeof out, "%04x:%02x:%02x.%x", domain, bus, dev, func);
  return out;
}

int findPci(const Machine& m, const std::string& id) {
  std::string key = lower(id);
  if (key.rfind("pci", 0) != 0) {
    try {
      key = normalizeBusId(id);
    } catch (const Error&) {
      return -1;
    }
  }
  for (size_t i = 0; i < m.pci.size(); ++i) {
    if (m.pci[i].id == key) return static_cast<int>(i);
  }
  return -1;
}

int pciDistance(const Machine& m, const std::string& a, const std::string& b) {
  std::vector<int> ca = chain(m, indexOrThrow(m, a));
  std::vector<int> cb = chain(m, indexOrThrow(m, b));
  for (size_t i = 0; i < ca.size(); ++i) {
    auto it = std::find(cb.begin(), cb.end(), ca[i]);
    if (it != cb.end()) return static_cast<int>(i + static_cast<size_t>(it - cb.begin()));
  }
  // No common PCI ancestor: up to and through the CPU (one level above the host bridges).
  return static_cast<int>(ca.size() + cb.size());
}

int numaDistance(const Machine& m, int a, int b) {
  if (a < 0 || b < 0) return 10;
  auto pos = [&](int id) {
    for (size_t i = 0; i < m.numa.size(); ++i) {
      if (m.numa[i].id == id) return static_cast<int>(i);
    }
    return -1;
  };
  int ia = pos(a), ib = pos(b);
  if (ia < 0 || ib < 0 || m.numaDistances.size() != m.numa.size()) return a == b ? 10 : 20;
  return m.numaDistances[static_cast<size_t>(ia)][static_cast<size_t>(ib)];
}

std::vector<int> numaNodesOfCpus(const Machine& m, const std::vector<int>& cpus) {
  std::vector<int> out;
  for (const NumaNode& n : m.numa) {
    bool hit = std::any_of(cpus.begin(), cpus.end(),
                           [&](int c) { return std::binary_search(n.cpus.begin(), n.cpus.end(), c); });
    if (hit) out.push_back(n.id);
  }
  return out;
}

std::string formatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

std::vector<int> parseCpuList(const std::string& text) {
  std::set<int> cpus;
  size_t pos = 0;
  auto bad = [&]() -> std::vector<int> {
    throw Error(Code::InvalidArgument, "'" + text + "' is not a CPU list (expected e.g. 0-3,8)");
  };
  auto number = [&](int* out) {
    size_t start = pos;
    long v = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      v = v * 10 + (text[pos++] - '0');
      if (v > 1 << 20) return false;
    }
    *out = static_cast<int>(v);
    return pos > start;
  };
  while (pos < text.size()) {
    int lo = 0, hi = 0;
    if (!number(&lo)) return bad();
    hi = lo;
    if (pos < text.size() && text[pos] == '-') {
      ++pos;
      if (!number(&hi) || hi < lo) return bad();
    }
    for (int c = lo; c <= hi; ++c) cpus.insert(c);
    if (pos < text.size() && text[pos++] != ',') return bad();
    if (pos == text.size() && text.back() == ',') return bad();
  }
  return {cpus.begin(), cpus.end()};
}

int matchFabricDomains(Machine& m, const std::vector<FabricDomain>& domains) {
  int matched = 0;
  for (Nic& nic : m.nics) {
    nic.fabricDomain.clear();
    for (const FabricDomain& d : domains) {
      std::string bus;
      try {
        bus = normalizeBusId(d.pciBusId);
      } catch (const Error&) {
        continue;
      }
      if (bus == nic.pciBusId) {
        nic.fabricDomain = d.name;
        ++matched;
        break;
      }
    }
  }
  return matched;
}

void validate(const Machine& m, const std::string& what) {
  auto sortedUnique = [](const std::vector<int>& v) {
    return std::adjacent_find(v.begin(), v.end(), std::greater_equal<int>()) == v.end();
  };
  if (m.packages < 1) invalid(what, "packages", "must be at least 1");
  if (m.cores < 1) invalid(what, "cores", "must be at least 1");
  if (m.cpus.empty() || !sortedUnique(m.cpus) || m.cpus.front() < 0) {
    invalid(what, "cpus", "must be a non-empty list of distinct CPUs");
  }
  if (m.numa.empty()) invalid(what, "numa", "must list at least one NUMA node");
  for (size_t i = 0; i < m.numa.size(); ++i) {
    std::string f = "numa[" + std::to_string(i) + "]";
    if (m.numa[i].id < 0 || (i > 0 && m.numa[i].id <= m.numa[i - 1].id)) {
      invalid(what, f + ".id", "NUMA ids must be distinct, ascending and non-negative");
    }
    if (!sortedUnique(m.numa[i].cpus)) invalid(what, f + ".cpus", "CPUs must be distinct");
  }
  if (!m.numaDistances.empty()) {
    if (m.numaDistances.size() != m.numa.size()) invalid(what, "numaDistances", "needs one row per NUMA node");
    for (size_t i = 0; i < m.numaDistances.size(); ++i) {
      if (m.numaDistances[i].size() != m.numa.size()) {
        invalid(what, "numaDistances[" + std::to_string(i) + "]", "needs one column per NUMA node");
      }
    }
  }
  auto knownNuma = [&](int id) {
    return id == -1 || std::any_of(m.numa.begin(), m.numa.end(), [&](const NumaNode& n) { return n.id == id; });
  };
  for (size_t i = 0; i < m.pci.size(); ++i) {
    std::string f = "pci[" + std::to_string(i) + "]";
    const PciNode& n = m.pci[i];
    if (findPci(m, n.id) != static_cast<int>(i)) invalid(what, f + ".id", "'" + n.id + "' is repeated");
    if (n.parent >= static_cast<int>(i)) invalid(what, f + ".parent", "the parent must come before the child");
    if (n.kind == PciKind::HostBridge && n.parent != -1) invalid(what, f + ".parent", "a host bridge has no parent");
  }
  auto checkDevice = [&](const std::string& f, const std::string& bus, const std::string& prevBus, int numa) {
    if (findPci(m, bus) < 0) invalid(what, f + ".pciBusId", "'" + bus + "' is not in the PCI tree");
    if (!prevBus.empty() && bus <= prevBus) invalid(what, f + ".pciBusId", "must be sorted by bus id, no repeats");
    if (!knownNuma(numa)) invalid(what, f + ".numa", std::to_string(numa) + " is not a NUMA node");
  };
  for (size_t i = 0; i < m.gpus.size(); ++i) {
    checkDevice("gpus[" + std::to_string(i) + "]", m.gpus[i].pciBusId, i ? m.gpus[i - 1].pciBusId : "",
                m.gpus[i].numaNode);
  }
  for (size_t i = 0; i < m.nics.size(); ++i) {
    if (m.nics[i].name.empty()) invalid(what, "nics[" + std::to_string(i) + "].name", "must not be empty");
    checkDevice("nics[" + std::to_string(i) + "]", m.nics[i].pciBusId, i ? m.nics[i - 1].pciBusId : "",
                m.nics[i].numaNode);
  }
}

}  // namespace conflux::topo
