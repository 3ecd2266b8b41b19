// Choosing where the topology comes from: CONFLUX_TOPO_FILE, hwloc, or sysfs; see discover.h.
#include <sched.h>

#include "core/config.h"
#include "core/log.h"
#include "core/topology/discover.h"
#include "core/topology/discover_util.h"
#include "core/topology/topology_json.h"

namespace conflux::topo {

bool haveHwloc() {
#ifdef CONFLUX_HAVE_HWLOC
  return true;
#else
  return false;
#endif
}

Machine discover() {
#ifdef CONFLUX_HAVE_HWLOC
  Machine m = detail::discoverHwloc();
#else
  Machine m = discoverSysfs();
#endif
  validate(m, "discovered topology (" + m.source + ")");
  return m;
}

Machine loadTopology() {
  std::string file = config::getString(config::Var::TOPO_FILE);
  Machine m = file.empty() ? discover() : loadFile(file);
  CFX_INFO(kInit, "topology from %s: %d sockets, %d cores, %zu NUMA nodes, %zu GPUs, %zu NICs",
           file.empty() ? m.source.c_str() : file.c_str(), m.packages, m.cores, m.numa.size(), m.gpus.size(),
           m.nics.size());
  return m;
}

std::vector<int> processCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

}  // namespace conflux::topo
