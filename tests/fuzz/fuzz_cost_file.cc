// CONFLUX_COST_FILE: the cost model's parameters, key=value lines. A bad line must be an Error naming
// the line; any accepted file leaves parameters the model can use: finite, non-negative predictions.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
  for (const CostedAlgo& a : rankAlgorithms(Collective::AllReduce, 1 << 20, shape, params)) {
    if (!std::isfinite(a.seconds) || a.seconds < 0) {
      std::fprintf(stderr, "an accepted cost file predicts %g s\n", a.seconds);
      std::abort();  // the selector would compare nonsense
    }
  }
  return 0;
}
