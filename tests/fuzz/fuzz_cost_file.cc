// CONFLUX_COST_FILE: the cost model's parameters, key=value lines. A bad line must be an Error naming
// the line; any accepted file leaves parameters the model can use.
#include <cstdint>
#include <sstream>
#include <string>

#include "algorithms/cost_model.h"
#include "core/error.h"

using namespace conflux;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  CostParams params;
  try {
    parseCostText(in, "fuzz", params);
  } catch (const Error&) {
    return 0;
  }
  CostShape shape;
  shape.nranks = 16;
  shape.nodes = 2;
  shape.ranksPerNode = 8;
  (void)rankAlgorithms(Collective::AllReduce, 1 << 20, shape, params);
  return 0;
}
