// CONFLUX_TUNER_CONFIG: the tuner's rules file. A bad line is a warning and skipped, never a crash;
// every rule kept names an algorithm, a protocol and a channel count in range.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "plugin/nccl_tuner_abi.h"
#include "plugin/tuner_rules.h"

using namespace conflux::plugin;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::istringstream in(text);
  const auto rules = tuner::parseRules(in, "fuzz", [](const std::string&) {});
  for (const tuner::Rule& r : rules) {
    if (r.algo < 0 || r.algo >= abi::kNumAlgorithms || r.proto < 0 || r.proto >= abi::kNumProtocols ||
        r.nChannels < 0 || r.nChannels > 64 || r.minBytes > r.maxBytes || r.coll < -1 || r.coll >= abi::kNumTunerColls) {
      std::abort();  // a rule the tuner would apply out of range
    }
  }
  (void)tuner::parseBytes(text);
  return 0;
}
