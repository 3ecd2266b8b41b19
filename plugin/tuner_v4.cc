// ncclTunerPlugin_v4: init returns the context through its last argument; destroy frees it.
#include "plugin/tuner_impl.h"

using namespace conflux::plugin;

// The exported symbol: a data object NCCL finds with dlsym.
extern "C" __attribute__((visibility("default"))) abi::TunerV4 ncclTunerPlugin_v4;
abi::TunerV4 ncclTunerPlugin_v4 = {
    .name = tuner::kName,
    .init = tuner::init,
    .getCollInfo = tuner::getCollInfo,
    .destroy = tuner::finalize,
};
