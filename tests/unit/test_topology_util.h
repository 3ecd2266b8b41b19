// Helpers for the topology tests: fixture paths and loading.
#pragma once

#include <string>

#include "core/topology/topology_json.h"

namespace conflux::topo::test {

inline std::string fixturePath(const std::string& name) {
  return std::string(CONFLUX_TOPO_FIXTURES) + "/" + name + ".json";
}

inline Machine fixture(const std::string& name) { return loadFile(fixturePath(name)); }

}  // namespace conflux::topo::test
