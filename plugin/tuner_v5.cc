// ncclTunerPlugin_v5 (NCCL 2.28): init takes the context first and also receives the NVLink domain
// info and NCCL's tuning constants, which Conflux's tuner reads nothing from and leaves unchanged.
#include "plugin/tuner_impl.h"

namespace conflux::plugin {
namespace {

abi::Result init(void** ctx, uint64_t /*commId*/, size_t nRanks, size_t nNodes, abi::Logger logger,
                 abi::NvlDomainInfo* /*nvlDomainInfo*/, abi::TunerConstants* /*constants*/) {
  return tuner::init(nRanks, nNodes, logger, ctx);
}

}  // namespace
}  // namespace conflux::plugin

using namespace conflux::plugin;

// The exported symbol: a data object NCCL finds with dlsym.
extern "C" __attribute__((visibility("default"))) abi::TunerV5 ncclTunerPlugin_v5;
abi::TunerV5 ncclTunerPlugin_v5 = {
    .name = tuner::kName,
    .init = init,
    .getCollInfo = tuner::getCollInfo,
    .finalize = tuner::finalize,
};
