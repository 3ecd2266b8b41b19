// conflux-perf net in a build without libfabric: the raw transport does not exist.
#include <stdexcept>

#include "net_target.h"

namespace cfxperf {

std::unique_ptr<NetTarget> makeRawTarget(int, const NetBuffers&, const PeerExchange&) {
  throw std::runtime_error("--raw needs a build with libfabric (CONFLUX_HAVE_OFI); this one has none");
}

}  // namespace cfxperf
