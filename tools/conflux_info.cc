// conflux-info: prints the library version, the CPU kernel path and every CONFLUX_* variable with its
// current value, default and documentation (`conflux-info --env`; `--markdown` for docs/environment.md).
// `--topology` summarises the machine topology and the NIC assignment; `--topology-json` dumps it as a
// topology file (docs/topology.md).
#include <cstdio>
#include <cstring>
#include <string>

#include "conflux/conflux.h"
#include "core/config.h"
#include "kernels/cpu/reduce.h"
#ifdef CONFLUX_INFO_TOPOLOGY
#include "core/error.h"
#include "core/topology/discover.h"
#include "core/topology/nic_assignment.h"
#include "core/topology/topology_json.h"

// The topology (CONFLUX_TOPO_FILE or discovered) as JSON, or as a summary with the NIC assignment of one
// local rank per GPU (per NUMA node without GPUs).
static int printTopology(bool json) {
  namespace topo = conflux::topo;
  try {
    topo::Machine m = topo::loadTopology();
    if (json) {
      printf("%s", topo::toJson(m).c_str());
      return 0;
    }
    printf("%s", topo::describe(m).c_str());
    int ranks = static_cast<int>(m.gpus.empty() ? m.numa.size() : m.gpus.size());
    topo::NicAssignment a = topo::assignNics(m, topo::defaultLocalities(m, ranks));
    printf("NIC assignment, one local rank per %s:\n", m.gpus.empty() ? "NUMA node" : "GPU");
    for (size_t r = 0; r < a.rankRails.size(); ++r) {
      std::string nics;
      for (int rail : a.rankRails[r]) {
        nics += " " + m.nics[static_cast<size_t>(a.railNics[static_cast<size_t>(rail)])].name + "(rail " +
                std::to_string(rail) + ")";
      }
      printf("  local rank %zu:%s\n", r, nics.empty() ? " none" : nics.c_str());
    }
    return 0;
  } catch (const conflux::Error& e) {
    fprintf(stderr, "conflux-info: %s\n", e.what());
    return 1;
  }
}
#endif

int main(int argc, char** argv) {
  bool markdown = argc > 1 && std::strcmp(argv[1], "--markdown") == 0;
  if (markdown) {
    printf("| variable | default | meaning |\n|---|---|---|\n");
    for (const auto& v : conflux::config::all()) {
      printf("| `%s` | `%s` | %s |\n", v.name, *v.defaultValue ? v.defaultValue : "(unset)", v.doc);
    }
    return 0;
  }
#ifdef CONFLUX_INFO_TOPOLOGY
  if (argc > 1 && (std::strcmp(argv[1], "--topology") == 0 || std::strcmp(argv[1], "--topology-json") == 0)) {
    return printTopology(std::strcmp(argv[1], "--topology-json") == 0);
  }
#endif
  int version = 0;
  cfxGetVersion(&version);
  printf("conflux %d.%d.%d, CPU kernels: %s\n\n", version / 10000, version / 100 % 100, version % 100,
         conflux::cpu::isaName());
  printf("%s", conflux::config::describeAll().c_str());
  return 0;
}
