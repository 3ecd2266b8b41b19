// Our own declarations of the binary interface NCCL expects from a tuner plugin: the enum values of
// collectives, algorithms and protocols, the v5 init arguments (NVLink domain info, tuning constants)
// and the ncclTunerPlugin_v5 / _v4 structs of function pointers. Written from the ABI facts in the
// project's reference sheet; nothing here is NCCL's code. Plain C layout only: these structs cross the
// dlopen boundary. Result codes and the logger type are shared with the net plugin (nccl_net_abi.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/nccl_net_abi.h"

namespace conflux::plugin::abi {

/// collType values of getCollInfo (NCCL's ncclFunc_t order).
enum TunerColl : int {
  kCollBroadcast = 0,
  kCollReduce = 1,
  kCollAllGather = 2,
  kCollReduceScatter = 3,
  kCollAllReduce = 4,
};
inline constexpr int kNumTunerColls = 5;

/// Algorithm rows of the cost table.
enum TunerAlgo : int {
  kAlgoTree = 0,
  kAlgoRing = 1,
  kAlgoCollNetDirect = 2,
  kAlgoCollNetChain = 3,
  kAlgoNvls = 4,
  kAlgoNvlsTree = 5,
  kAlgoPat = 6,
};
inline constexpr int kNumAlgorithms = 7;

/// Protocol columns of the cost table.
enum TunerProto : int {
  kProtoLL = 0,
  kProtoLL128 = 1,
  kProtoSimple = 2,
};
inline constexpr int kNumProtocols = 3;

/// Hardware link classes (the first index of TunerConstants::hwLatencies).
enum TunerHw : int { kHwNvlink = 0, kHwPci = 1, kHwNet = 2 };
inline constexpr int kNumHwLinks = 3;
/// Rows of the per-channel bandwidth arrays (NCCL indexes them by GPU generation).
inline constexpr int kNumBwRows = 4;

/// A cost table entry below zero: the algorithm/protocol pair is unavailable for this call.
inline constexpr float kCostUnavailable = -1.0f;

extern "C" {

/// v5 init: how the communicator's ranks group into NVLink domains.
struct NvlDomainInfo {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
};

/// v5 init: NCCL's tuning constants (in/out: a tuner may overwrite them; Conflux's leaves them alone).
struct TunerConstants {
  double baseLatencies[kNumAlgorithms][kNumProtocols];
  double hwLatencies[kNumHwLinks][kNumAlgorithms][kNumProtocols];
  double llMaxBws[kNumBwRows][3];
  double perChMaxRingLL128Bws[kNumBwRows][3];
  double perChMaxTreeLL128Bws[kNumBwRows][3];
  double perChMaxTreeBws[kNumBwRows][3];
  double perChMaxNVLSTreeBws[kNumBwRows][3];
};

/// ncclTunerPlugin_v5 (NCCL 2.28): one context per communicator, created by init, freed by finalize.
struct TunerV5 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, Logger logger,
                 NvlDomainInfo* nvlDomainInfo, TunerConstants* constants);
  /// collCostTable is a contiguous float[numAlgo][numProto] cast to float**.
  Result (*getCollInfo)(void* ctx, int collType, size_t nBytes, int numPipeOps, float** collCostTable, int numAlgo,
                        int numProto, int regBuff, int* nChannels);
  Result (*finalize)(void* ctx);
};

/// ncclTunerPlugin_v4: init returns the context last; destroy frees it.
struct TunerV4 {
  const char* name;
  Result (*init)(size_t nRanks, size_t nNodes, Logger logger, void** ctx);
  Result (*getCollInfo)(void* ctx, int collType, size_t nBytes, int numPipeOps, float** collCostTable, int numAlgo,
                        int numProto, int regBuff, int* nChannels);
  Result (*destroy)(void* ctx);
};

}  // extern "C"

// Layout checks (LP64): the constants are 104 doubles in declaration order; the structs are pointers only.
static_assert(sizeof(NvlDomainInfo) == 12);
static_assert(offsetof(TunerConstants, baseLatencies) == 0);
static_assert(offsetof(TunerConstants, hwLatencies) == 21 * sizeof(double));
static_assert(offsetof(TunerConstants, llMaxBws) == 84 * sizeof(double));
static_assert(offsetof(TunerConstants, perChMaxRingLL128Bws) == 96 * sizeof(double));
static_assert(offsetof(TunerConstants, perChMaxTreeLL128Bws) == 108 * sizeof(double));
static_assert(offsetof(TunerConstants, perChMaxTreeBws) == 120 * sizeof(double));
static_assert(offsetof(TunerConstants, perChMaxNVLSTreeBws) == 132 * sizeof(double));
static_assert(sizeof(TunerConstants) == 144 * sizeof(double));
static_assert(sizeof(TunerV5) == 4 * sizeof(void*) && offsetof(TunerV5, finalize) == 3 * sizeof(void*));
static_assert(sizeof(TunerV4) == 4 * sizeof(void*) && offsetof(TunerV4, destroy) == 3 * sizeof(void*));

}  // namespace conflux::plugin::abi
