// The algorithm selector: picks by collective, message size and communicator shape, and says why.
// Across nodes it takes the cheapest algorithm by the cost model (cost_model.h) and names the candidates
// with their predicted times; on one node it keeps the thresholds measured there (shared-memory
// algorithms the model does not cost). CONFLUX_ALGO forces a choice ("ring", or per collective
// "allreduce=ring,broadcast=tree").
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
  bool peerBuffers = false;  ///< This call's buffers are mapped by every peer (Algo::Direct possible).
  int ranksPerNode = 0;      ///< Ranks on every node when all nodes have the same number, else 0.
  int maxRanksPerNode = 1;   ///< Ranks on the largest node.
};

struct Selection {
  Algo algo = Algo::Ring;
  std::string reason;     ///< One line, e.g. "4 ranks share memory and 4 MiB > 64 KiB: two-shot".
};

class Selector {
 public:
  /// Parses `forced` (the CONFLUX_ALGO value); throws Error(InvalidArgument) naming CONFLUX_ALGO on a bad value.
  explicit Selector(const std::string& forced = "");

  Selection select(Collective coll, uint64_t bytes, const CommShape& shape) const;
  /// The cost model's parameters (communicators spanning nodes: probed or from CONFLUX_COST_FILE).
  void setCostParams(const CostParams& params) { cost_ = params; }
  const CostParams& costParams() const { return cost_; }
  /// True when CONFLUX_ALGO names an algorithm for `coll` (then the eager path stays out of the way).
  bool forces(Collective coll) const { return forced(coll).has_value(); }
  /// The algorithm CONFLUX_ALGO names for `coll`, if any.
  std::optional<Algo> forced(Collective coll) const;

 private:
  Selection byDefault(Collective coll, uint64_t bytes, const CommShape& shape) const;
  /// `s` when its algorithm implements `coll` on this shape, else the first algorithm that does.
  Selection supported(Selection s, Collective coll, const CommShape& shape) const;
  CostParams cost_;
  std::optional<Algo> forcedAll_;
  std::map<Collective, Algo> forcedPer_;
};

}  // namespace conflux
