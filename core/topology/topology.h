// The machine topology as plain data: CPUs, NUMA nodes, the PCI tree, GPUs and NICs. Discovery
// (discover.h) fills it from hwloc or sysfs; topology_json.h dumps it to and loads it from a file so
// that everything built on it (NIC assignment, transport selection, the cost model) is tested on
// fixtures of real machines. docs/topology.md describes the model and the file format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace conflux::topo {

/// What a node of the PCI tree is.
enum class PciKind { HostBridge, Bridge, Gpu, Nic, Other };

/// Lower-case name used in files and summaries: "hostbridge", "bridge", "gpu", "nic", "other".
const char* pciKindName(PciKind kind);
/// Inverse of pciKindName; false when @p name is not one of them.
bool parsePciKind(const std::string& name, PciKind* kind);

/// One node of the PCI tree. Host bridges (the roots) are named like Linux names root buses in sysfs,
/// "pci<domain>:<bus>" (e.g. "pci0000:10"); every other node by its bus id "dddd:bb:dd.f".
struct PciNode {
  std::string id;
  int parent = -1;           ///< index in Machine::pci of the parent; -1 for host bridges
  PciKind kind = PciKind::Other;
  uint16_t vendorId = 0;     ///< 0 for host bridges
  uint16_t deviceId = 0;
  uint32_t classId = 0;      ///< class and subclass, e.g. 0x0302 (3D controller), 0x0200 (Ethernet)
  double linkGBps = 0;       ///< PCIe link bandwidth in GB/s as hwloc reports it; 0 when unknown

  bool operator==(const PciNode&) const = default;
};

/// A NUMA node: its OS index, the CPUs (OS indices of hardware threads) it holds and its memory.
struct NumaNode {
  int id = 0;
  std::vector<int> cpus;     ///< ascending
  uint64_t memoryBytes = 0;

  bool operator==(const NumaNode&) const = default;
};

/// A GPU. Machine::gpus is sorted by PCI bus id, the order CUDA uses with CUDA_DEVICE_ORDER=PCI_BUS_ID.
struct Gpu {
  std::string name;          ///< e.g. "NVIDIA H100 80GB HBM3"
  std::string pciBusId;      ///< its node in Machine::pci
  int numaNode = -1;         ///< OS index of the nearest NUMA node; -1 when unknown

  bool operator==(const Gpu&) const = default;
};

/// A network adapter (one per PCI function). Machine::nics is sorted by PCI bus id.
struct Nic {
  std::string name;          ///< RDMA device name when it has one (e.g. "rdmap16s27"), else the netdev ("eth0")
  std::string pciBusId;      ///< its node in Machine::pci
  double speedGbps = 0;      ///< link speed in Gbit/s; 0 when unknown
  int numaNode = -1;         ///< OS index of the nearest NUMA node; -1 when unknown
  bool rdma = false;         ///< has an RDMA (verbs) device, e.g. EFA or InfiniBand
  std::string fabricDomain;  ///< libfabric domain on this NIC (matchFabricDomains); empty when none

  bool operator==(const Nic&) const = default;
};

/// One machine (node). Every pciBusId in gpus and nics names a node of pci (see validate).
struct Machine {
  std::string hostname;
  std::string source;        ///< how it was made: "hwloc 2.9.0", "sysfs", or what a fixture says
  int packages = 1;          ///< CPU sockets
  int cores = 0;             ///< physical cores
  std::vector<int> cpus;     ///< OS indices of the usable hardware threads, ascending
  std::vector<NumaNode> numa;                    ///< ascending by id
  std::vector<std::vector<int>> numaDistances;   ///< [i][j] between numa[i] and numa[j] (10 = local)
  std::vector<PciNode> pci;  ///< parents come before their children
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;

  bool operator==(const Machine&) const = default;
};

/// Canonical bus id "dddd:bb:dd.f" in lower case; a missing domain becomes "0000". Throws
/// Error(InvalidArgument) naming @p busId when it is not a PCI bus id.
std::string normalizeBusId(const std::string& busId);

/// Index in m.pci of the node named @p id (after normalizeBusId for bus ids), or -1.
int findPci(const Machine& m, const std::string& id);

/// Hops between two PCI nodes through their nearest common ancestor (0 for the same node, 2 for two
/// devices behind one switch). Nodes under different host bridges meet at the CPU, which counts as one
/// more level above the host bridges. Throws Error(InvalidArgument) naming an id that is not in m.pci.
int pciDistance(const Machine& m, const std::string& a, const std::string& b);

/// NUMA distance between the nodes with OS indices @p a and @p b (10 = local). An unknown node (-1) is
/// treated as local to everything; without a matrix, 10 for the same node and 20 otherwise.
int numaDistance(const Machine& m, int a, int b);

/// OS indices of the NUMA nodes holding any of @p cpus, ascending.
std::vector<int> numaNodesOfCpus(const Machine& m, const std::vector<int>& cpus);

/// Linux cpulist text ("0-23,48-71") of ascending CPU indices, and back. parseCpuList throws
/// Error(InvalidArgument) quoting the text when it does not parse.
std::string formatCpuList(const std::vector<int>& cpus);
std::vector<int> parseCpuList(const std::string& text);

/// A libfabric domain and the PCI bus id of the NIC it runs on (from fi_info's nic->bus_attr).
struct FabricDomain {
  std::string name;          ///< e.g. "rdmap16s27-rdm"
  std::string pciBusId;
};

/// Sets Nic::fabricDomain of every NIC whose bus id matches a domain (the first match wins; others are
/// cleared). Domains without a bus id or on no known NIC are ignored. Returns the number of NICs matched.
int matchFabricDomains(Machine& m, const std::vector<FabricDomain>& domains);

/// Checks the invariants the rest of the code relies on (sorted, parents first, every bus id known,
/// square distance matrix, ...). Throws Error(InvalidArgument) starting with @p what and naming the field.
void validate(const Machine& m, const std::string& what);

/// A few lines for people: sockets, cores, NUMA nodes, GPUs and NICs with their NUMA node and PCI path.
std::string describe(const Machine& m);

}  // namespace conflux::topo
