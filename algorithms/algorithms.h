// The registry of call strategies: names, what each supports and needs, and plan construction.
//
// Most strategies are plan algorithms: each builds, for one rank, a Plan (plan.h) that is correct for any
// number of ranks >= 1, any count (0 included, counts not divisible by the number of ranks included), any
// root, and both the out-of-place and the in-place buffer layouts of the collective. The others run a
// call without a plan, on an engine of their own (Engine): the eager path for small inputs among the
// ranks of one node (src/eager.h) and the CUDA-IPC kernels for device buffers (src/device_call.h). All of
// them are rows of one table (algorithms.cc), chosen by one selector (selector.h) and forced by the same
// CONFLUX_ALGO names.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "algorithms/plan.h"
#include "core/types.h"

namespace conflux {

enum class Algo : uint8_t {
  Ring,                ///< Ring: reduce-scatter/all-gather rings, pipelined chain broadcast.
  RecHalvingDoubling,  ///< Rabenseifner: recursive halving then doubling (non-power-of-two fold).
  BinomialTree,        ///< Pipelined binomial tree (latency-bound, small messages).
  DoubleBinaryTree,    ///< Two complementary binary trees, each carrying half the data, pipelined.
  OneShot,             ///< Direct over peer-visible staging: every rank reads every peer's chunk.
  TwoShot,             ///< Direct over staging: reduce-scatter into staging, then all-gather from it.
  Pairwise,            ///< All-to-all in n-1 pairwise exchange rounds.
  Direct,              ///< Load/store on every rank's own buffers (all mapped by every peer): no copies.
  Hierarchical,        ///< Across nodes: reduce-scatter in the node, per-shard rings between nodes, all-gather.
  HierarchicalRhd,     ///< The same with recursive halving-doubling between nodes (log2 N latency).
  HierarchicalDbtree,  ///< The same with the double binary tree between nodes.
  Eager,               ///< No plan: small inputs published in shared-memory slots, one flag per call, no barrier.
  IpcOneShot,          ///< No plan: CUDA-IPC all-reduce kernel, every rank reads every peer's input.
  IpcTwoShot,          ///< No plan: CUDA-IPC all-reduce kernel, reduce-scatter then all-gather.
  Ipc,                 ///< No plan: the CUDA-IPC kernel of the other collectives (every rank reads its peers).
};
inline constexpr int kNumAlgos = 15;

/// What runs a strategy's calls.
enum class Engine : uint8_t {
  Plan,     ///< The executor runs the plan buildPlan makes (host buffers; device buffers staged).
  Eager,    ///< The eager slots of the shared-memory world (host buffers, one node).
  CudaIpc,  ///< CUDA kernels over peers' device memory mapped through CUDA IPC (device buffers, one node).
};

/// Short name: "ring", "rhd", "tree", "dbtree", "oneshot", "twoshot", "pairwise", "direct", "hier", "hier_rhd",
/// "hier_dbtree", "eager", "ipc_oneshot", "ipc_twoshot", "ipc".
std::string_view algoName(Algo a);

/// The engine that runs `a`'s calls.
Engine algoEngine(Algo a);

/// Inverse of algoName (exact, lower-case match); nullopt for an unknown name.
std::optional<Algo> parseAlgo(std::string_view name);

/// Whether `a` can build plans for `c` on a communicator of `nranks` ranks (nranks >= 1).
bool algoSupports(Algo a, Collective c, int nranks);

/// Whether the algorithm's plans use peer-visible staging memory (so all ranks must share a node).
bool algoUsesStaging(Algo a);
/// hier, hier_rhd or hier_dbtree: plans built around the node layout (hierarchical.cc).
bool isHierarchical(Algo a);

/// Whether the algorithm's plans read and write peers' own buffers (all ranks' buffers must be mapped
/// by every peer: library-allocated memory, see cfxMemAlloc).
bool algoUsesPeerBuffers(Algo a);

/// Every plan algorithm (Engine::Plan) that supports `c` (for some nranks), in registry order.
std::vector<Algo> algosFor(Collective c);

/// Every strategy, plan or not, that supports `c`, in registry order.
std::vector<Algo> strategiesFor(Collective c);

/// Builds rank `p.rank`'s plan. Throws Error(InvalidArgument) naming the algorithm and the collective
/// when the pair is unsupported or `a` is no plan algorithm, or when the parameters are invalid (nranks < 1, rank or root out of
/// range, eltSize 0, or stagingBytes too small for a staging algorithm). chunkBytes 0 means unchunked.
Plan buildPlan(Algo a, const PlanParams& p);

}  // namespace conflux
