// The one implementation behind ncclTunerPlugin_v5 and _v4: a context per NCCL communicator holding
// its shape, Conflux's cost model parameters and the optional rules file, and getCollInfo, which lowers
// the cost table entry of the algorithm and protocol that the rules or the model prefer. Every entry
// point converts exceptions to ncclResult_t and logs through NCCL's logger; the per-version adapters
// (tuner_v5.cc, tuner_v4.cc) only reshape arguments.
#pragma once

#include <cstddef>

#include "plugin/nccl_tuner_abi.h"

namespace conflux::plugin::tuner {

/// The structs' name field.
inline constexpr const char* kName = "Conflux";

/// Creates a context for a communicator of `nRanks` ranks over `nNodes` nodes: reads CONFLUX_COST_FILE
/// (cost model parameters; else the model's defaults) and CONFLUX_TUNER_CONFIG (rules). Problems in
/// either file are warnings through `logger` (may be NULL: then nothing is logged), never failures.
abi::Result init(size_t nRanks, size_t nNodes, abi::Logger logger, void** ctx);

/// Lowers to 0.0 at most one available entry of the contiguous float[numAlgo][numProto] table
/// `collCostTable`: the first matching rule's, else the model's choice between TREE and RING (see
/// docs/plugin.md). Unavailable entries (< 0) and indices beyond numAlgo x numProto are never touched;
/// `*nChannels` changes only when the applied rule names a channel count.
abi::Result getCollInfo(void* ctx, int collType, size_t nBytes, int numPipeOps, float** collCostTable, int numAlgo,
                        int numProto, int regBuff, int* nChannels);

/// Frees a context from init.
abi::Result finalize(void* ctx);

}  // namespace conflux::plugin::tuner
