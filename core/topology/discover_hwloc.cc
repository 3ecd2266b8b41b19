// Discovery with hwloc 2.x: CPUs, NUMA nodes and their distances, the PCI tree (host bridges, bridges,
// devices), GPUs (display-class NVIDIA/AMD functions or GPU OS devices) and NICs (network and
// OpenFabrics OS devices, one NIC per PCI function). Built only with CONFLUX_HAVE_HWLOC.
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "core/error.h"
#include "core/topology/discover_util.h"

namespace conflux::topo::detail {

namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::vector<int> bits(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (set == nullptr) return out;
  unsigned i = 0;
  hwloc_bitmap_foreach_begin(i, set) { out.push_back(static_cast<int>(i)); }
  hwloc_bitmap_foreach_end();
  return out;
}

std::string busId(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", static_cast<unsigned>(p.domain), p.bus, p.dev, p.func);
  return buf;
}

// Walks the whole tree (normal and I/O children) depth first, so parents enter Machine::pci first.
class Walker {
 public:
  Walker(hwloc_topology_t topo, Machine& m) : topo_(topo), m_(m) {}

  void visit(hwloc_obj_t obj, int pciParent) {
    int here = pciParent;
    if (obj->type == HWLOC_OBJ_BRIDGE) here = addBridge(obj, pciParent);
    if (obj->type == HWLOC_OBJ_PCI_DEVICE) here = addDevice(obj, pciParent);
    if (obj->type == HWLOC_OBJ_OS_DEVICE && pciParent >= 0) addOsDevice(obj, pciParent);
    for (hwloc_obj_t c = obj->first_child; c != nullptr; c = c->next_sibling) visit(c, here);
    for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling) visit(c, here);
  }

  void finishNics() {
    for (auto& [bus, names] : nicNames_) {
      const std::string& name = names.second.empty() ? names.first : names.second;
      m_.nics.push_back({name, bus, nicSpeedGbps(names.second, names.first), numaOf_[bus], !names.second.empty(), ""});
    }
  }

 private:
  int add(PciNode n, hwloc_obj_t obj) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo_, obj);
    int numa = -1;
    if (anc != nullptr && anc->nodeset != nullptr && hwloc_bitmap_weight(anc->nodeset) == 1) {
      numa = hwloc_bitmap_first(anc->nodeset);
    }
    numaOf_[n.id] = numa;
    m_.pci.push_back(std::move(n));
    return static_cast<int>(m_.pci.size()) - 1;
  }

  int addBridge(hwloc_obj_t obj, int parent) {
    const auto& b = obj->attr->bridge;
    PciNode n;
    if (b.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "pci%04x:%02x", static_cast<unsigned>(b.downstream.pci.domain),
                    b.downstream.pci.secondary_bus);
      n.id = buf;
      n.kind = PciKind::HostBridge;
    } else {
      n.id = busId(b.upstream.pci);
      n.parent = parent;
      n.kind = PciKind::Bridge;
      n.vendorId = b.upstream.pci.vendor_id;
      n.deviceId = b.upstream.pci.device_id;
      n.classId = b.upstream.pci.class_id;
      n.linkGBps = b.upstream.pci.linkspeed;
    }
    return add(n, obj);
  }

  int addDevice(hwloc_obj_t obj, int parent) {
    const auto& p = obj->attr->pcidev;
    PciNode n;
    n.id = busId(p);
    n.parent = parent;
    n.vendorId = p.vendor_id;
    n.deviceId = p.device_id;
    n.classId = p.class_id;
    n.linkGBps = p.linkspeed;
    int i = add(n, obj);
    if (looksLikeGpu(p.vendor_id, p.class_id)) addGpu(obj, i);
    return i;
  }

  void addGpu(hwloc_obj_t pciObj, int index, const char* model = nullptr) {
    const std::string& id = m_.pci[static_cast<size_t>(index)].id;
    for (const Gpu& g : m_.gpus) {
      if (g.pciBusId == id) return;
    }
    const char* name = model ? model : hwloc_obj_get_info_by_name(pciObj, "PCIDevice");
    char fallback[32];
    if (name == nullptr) {
      std::snprintf(fallback, sizeof fallback, "PCI %04x:%04x", pciObj->attr->pcidev.vendor_id,
                    pciObj->attr->pcidev.device_id);
      name = fallback;
    }
    m_.gpus.push_back({name, id, numaOf_[id]});
  }

  void addOsDevice(hwloc_obj_t obj, int pciIndex) {
    const std::string& bus = m_.pci[static_cast<size_t>(pciIndex)].id;
    if (m_.pci[static_cast<size_t>(pciIndex)].kind == PciKind::HostBridge || obj->name == nullptr) return;
    switch (obj->attr->osdev.type) {
      case HWLOC_OBJ_OSDEV_NETWORK:
        if (nicNames_[bus].first.empty()) nicNames_[bus].first = obj->name;
        break;
      case HWLOC_OBJ_OSDEV_OPENFABRICS:
        if (nicNames_[bus].second.empty()) nicNames_[bus].second = obj->name;
        break;
      case HWLOC_OBJ_OSDEV_GPU:
      case HWLOC_OBJ_OSDEV_COPROC:
        if (obj->parent != nullptr && obj->parent->type == HWLOC_OBJ_PCI_DEVICE &&
            (obj->parent->attr->pcidev.class_id >> 8) == 0x03) {
          addGpu(obj->parent, pciIndex, hwloc_obj_get_info_by_name(obj, "GPUModel"));
        }
        break;
      default:
        break;
    }
  }

  hwloc_topology_t topo_;
  Machine& m_;
  std::map<std::string, int> numaOf_;                                  // bus id -> NUMA node
  std::map<std::string, std::pair<std::string, std::string>> nicNames_;  // bus id -> (netdev, rdma device)
};

void readNumaDistances(hwloc_topology_t topo, Machine& m) {
  unsigned count = 1;
  hwloc_distances_s* d = nullptr;
  if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &count, &d, HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0 ||
      count == 0 || d == nullptr) {
    return;
  }
  std::vector<int> pos(d->nbobjs, -1);
  for (unsigned i = 0; i < d->nbobjs; ++i) {
    for (size_t k = 0; k < m.numa.size(); ++k) {
      if (m.numa[k].id == static_cast<int>(d->objs[i]->os_index)) pos[i] = static_cast<int>(k);
    }
  }
  if (d->nbobjs == m.numa.size()) {
    m.numaDistances.assign(m.numa.size(), std::vector<int>(m.numa.size(), 0));
    for (unsigned i = 0; i < d->nbobjs; ++i) {
      for (unsigned j = 0; j < d->nbobjs; ++j) {
        if (pos[i] >= 0 && pos[j] >= 0) {
          m.numaDistances[static_cast<size_t>(pos[i])][static_cast<size_t>(pos[j])] =
              static_cast<int>(d->values[i * d->nbobjs + j]);
        }
      }
    }
  }
  hwloc_distances_release(topo, d);
}

}  // namespace

Machine discoverHwloc() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) throwSystemError("hwloc_topology_init");
  TopologyPtr topo(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // The Linux backend reads the PCI tree from sysfs by itself; the libpciaccess-based "pci" component
  // finds nothing more here and leaks an allocation per load (LeakSanitizer), so leave it out.
  hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
  if (hwloc_topology_load(raw) != 0) throwSystemError("hwloc_topology_load");

  Machine m;
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) m.hostname = host;
  const char* version = hwloc_obj_get_info_by_name(hwloc_get_root_obj(raw), "hwlocVersion");
  unsigned api = hwloc_get_api_version();
  m.source = version ? std::string("hwloc ") + version
                     : "hwloc API " + std::to_string(api >> 16) + "." + std::to_string((api >> 8) & 0xff);
  m.packages = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PACKAGE);
  m.cores = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_CORE);
  m.cpus = bits(hwloc_get_root_obj(raw)->cpuset);
  int numaCount = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < numaCount; ++i) {
    hwloc_obj_t n = hwloc_get_obj_by_type(raw, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    m.numa.push_back({static_cast<int>(n->os_index), bits(n->cpuset), n->attr->numanode.local_memory});
  }
  if (m.numa.empty()) m.numa.push_back({0, m.cpus, 0});
  std::sort(m.numa.begin(), m.numa.end(), [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  readNumaDistances(raw, m);

  Walker walker(raw, m);
  walker.visit(hwloc_get_root_obj(raw), -1);
  walker.finishNics();
  finishMachine(m);
  return m;
}

}  // namespace conflux::topo::detail
