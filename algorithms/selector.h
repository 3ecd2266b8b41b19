// The selector: picks every call's strategy (algorithms.h: the plan algorithms, the eager path, the
// CUDA-IPC kernels) by collective, message size, memory and communicator shape, and says why. Across
// nodes it takes the cheapest plan by the cost model (cost_model.h) and names the candidates with their
// predicted times; on one node it keeps the thresholds measured there (shared-memory algorithms the
// model does not cost). CONFLUX_ALGO forces a choice ("ring", "eager", "ipc_twoshot", or per collective
// "allreduce=ring,broadcast=tree"); a forced strategy that cannot run a call says so in the reason.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "algorithms/algorithms.h"
#include "algorithms/cost_model.h"
#include "core/types.h"

namespace conflux {

/// The communicator shape the selector needs.
struct CommShape {
  int nranks = 1;
  int numNodes = 1;
  bool allLocal = true;   ///< Every rank shares memory with every other (direct algorithms possible).
  bool peerBuffers = false;  ///< Every peer reaches this call's buffers, mapped or by single-copy reads (Algo::Direct possible).
  int ranksPerNode = 0;      ///< Ranks on every node when all nodes have the same number, else 0.
  int maxRanksPerNode = 1;   ///< Ranks on the largest node.
};

struct Selection {
  Algo algo = Algo::Ring;
  std::string reason;     ///< One line, e.g. "4 ranks share memory and 4 MiB > 64 KiB: two-shot".
  uint64_t chunkBytes = 0;  ///< The plan's chunk when the cost model chose it (bestSettings), else 0.
  int radix = 0;            ///< rhd's radix when the cost model chose it (CONFLUX_RHD_RADIX=auto), else 0.
};

/// Device buffers whose peers CUDA IPC reaches (src/device_call.h): what the kernel choice depends on.
struct IpcShape {
  int nranks = 2;
  bool oneGpu = false;        ///< every rank on the same GPU
  uint64_t oneShotBytes = 0;  ///< CONFLUX_CUDA_ONESHOT_BYTES
};

class Selector {
 public:
  /// Parses `forced` (the CONFLUX_ALGO value); throws Error(InvalidArgument) naming CONFLUX_ALGO on a bad value.
  explicit Selector(const std::string& forced = "");

  /// The plan algorithm for a call of `bytes` (the larger of its send and receive buffers).
  Selection select(Collective coll, uint64_t bytes, const CommShape& shape) const;

  /// The eager path (ranks of one node, host buffers): the largest input (src/eager.h eagerInputBytes)
  /// `coll` runs eagerly. `configured` (CONFLUX_EAGER_BYTES) by default, `capacity` (one slot) when
  /// CONFLUX_ALGO forces eager for it, nullopt when CONFLUX_ALGO forces another strategy for it.
  std::optional<uint64_t> eagerLimit(Collective coll, uint64_t configured, uint64_t capacity) const;
  /// Why a call of `inputBytes` runs eagerly under `limit` (eagerLimit's value): for logs and --explain.
  Selection explainEager(Collective coll, uint64_t inputBytes, uint64_t limit, const CommShape& shape) const;
  /// For --explain: the predicted times (plan_cost.h) of every plan algorithm that could run the call `p`
  /// describes on this shape, cheapest first, after `eagerBytes` eager's when that is not 0 ("eager 3.1 us;
  /// plans: oneshot 5.0 us < twoshot 7.2 us < ring 12 us"). Builds every rank's plan of each: not for
  /// every call.
  std::string predictedTimes(const PlanParams& p, const CommShape& shape, uint64_t eagerBytes = 0) const;

  /// Device buffers that CUDA IPC reaches: the kernel for a piece of `bytes` of `coll` (IpcOneShot or
  /// IpcTwoShot for all-reduce, Ipc for the others), with a reason when `explain`; nullopt when
  /// CONFLUX_ALGO forces a strategy of another engine for `coll` (the call is then staged through host
  /// memory, where that strategy runs).
  std::optional<Selection> selectIpc(Collective coll, uint64_t bytes, const IpcShape& shape, bool explain) const;
  /// The cost model's parameters (communicators spanning nodes: probed or from CONFLUX_COST_FILE).
  void setCostParams(const CostParams& params) { cost_ = params; }
  const CostParams& costParams() const { return cost_; }
  /// The strategy CONFLUX_ALGO names for `coll` when that strategy supports `coll`; nullopt otherwise
  /// (then the default choice runs, and plan selection says why).
  std::optional<Algo> forced(Collective coll) const;

 private:
  /// The strategy CONFLUX_ALGO names for `coll`, supported or not.
  std::optional<Algo> named(Collective coll) const;
  Selection byDefault(Collective coll, uint64_t bytes, const CommShape& shape) const;
  /// `s` when its algorithm implements `coll` on this shape, else the first algorithm that does.
  Selection supported(Selection s, Collective coll, const CommShape& shape) const;
  CostParams cost_;
  std::optional<Algo> forcedAll_;
  std::map<Collective, Algo> forcedPer_;
};

}  // namespace conflux
