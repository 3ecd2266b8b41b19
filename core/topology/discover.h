// Finding this machine's topology: hwloc when built with it, sysfs otherwise, or a file named by
// CONFLUX_TOPO_FILE so that code depending on topology runs on fixtures.
#pragma once

#include <vector>

#include "core/topology/topology.h"

namespace conflux::topo {

/// True when this build discovers with hwloc (CONFLUX_HAVE_HWLOC).
bool haveHwloc();

/// Discovers this machine: with hwloc when available, else discoverSysfs(). Throws Error(SystemError)
/// when hwloc fails to load the topology.
Machine discover();

/// Discovery from /sys alone (online CPUs, NUMA nodes, network and RDMA devices, NVIDIA and AMD GPUs,
/// and the PCI path of each). Falls back to one NUMA node holding every online CPU.
Machine discoverSysfs();

/// The topology everything else should use: the file named by CONFLUX_TOPO_FILE when set (errors name
/// the file and the field), else discover(). Logs where it came from (INFO, INIT).
Machine loadTopology();

/// CPUs this process may run on (its affinity mask), ascending; empty when it cannot be read.
std::vector<int> processCpus();

}  // namespace conflux::topo
