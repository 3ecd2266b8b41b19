// CONFLUX_TOPO_FILE and topology dumps: the machine description read from JSON (core/topology). Bad
// text must be an Error naming what is wrong; what parses must be written back and parse again.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/topology/topology_json.h"

using namespace conflux;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  topo::Machine m;
  try {
    m = topo::fromJson(text, "fuzz");
  } catch (const Error&) {
    return 0;  // refused, with a message: right
  }
  // What was accepted must be written so that it reads back as the same machine.
  const std::string once = topo::toJson(m);
  try {
    if (topo::toJson(topo::fromJson(once, "fuzz round trip")) != once) {
      std::fprintf(stderr, "a topology changed on its way through toJson and fromJson:\n%s\n", once.c_str());
      std::abort();
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "toJson wrote what fromJson refuses: %s\n%s\n", e.what(), once.c_str());
    std::abort();
  }
  return 0;
}
