// CONFLUX_TOPO_FILE and topology dumps: the machine description read from JSON (core/topology). Bad
// text must be an Error naming what is wrong; what parses must be written back and parse again.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/topology/topology_json.h"

using namespace conflux;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const topo::Machine m = topo::fromJson(text, "fuzz");
    (void)topo::fromJson(topo::toJson(m), "fuzz round trip");
  } catch (const Error&) {
  }
  return 0;
}
