// One collective under the plan simulator across counts, element sizes, in and out of place, and three
// chunkings (unchunked; a few elements per chunk, so many segments and rounds per step; a chunk that
// divides nothing): shared by the simulator tests of node layouts and of rhd's radix.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/simulator.h"

namespace conflux {

struct SimSweep {
  Algo algo = Algo::Ring;
  Collective coll = Collective::AllReduce;
  int nranks = 1;
  std::shared_ptr<const NodeLayout> layout;  ///< null: all ranks on one node
  int radix = 2;                             ///< PlanParams::radix
  std::vector<uint64_t> counts;
  std::string what;                          ///< names the case in failure messages
};

/// Runs every configuration of `s`, reporting the first few failures; returns the number of runs.
inline int runSimSweep(const SimSweep& s) {
  static constexpr RedOp kOps[] = {RedOp::Sum, RedOp::Avg,  RedOp::PreMulSum, RedOp::Max,
                                   RedOp::Min, RedOp::Prod, RedOp::Bxor};
  int runs = 0, failures = 0;
  for (uint64_t count : s.counts) {
    for (uint32_t elt : {1u, 2u, 4u, 8u}) {
      for (bool inPlace : {false, true}) {
        for (int chunking = 0; chunking < 3; ++chunking) {
          SimConfig cfg;
          PlanParams& p = cfg.params;
          p.coll = s.coll;
          p.root = (runs + static_cast<int>(count)) % s.nranks;
          p.nranks = s.nranks;
          p.count = count;
          p.eltSize = elt;
          p.layout = s.layout;
          p.radix = s.radix;
          p.chunkBytes = chunking == 0 ? 0 : chunking == 1 ? 3 * uint64_t{elt} : 37 * uint64_t{elt} + 1;
          cfg.op = kOps[(static_cast<uint64_t>(runs) + count) % std::size(kOps)];
          cfg.inPlace = inPlace;
          cfg.calls = 2;
          cfg.seed = static_cast<uint64_t>(runs) * 7919 + count;
          const SimResult r = simulate(cfg, s.algo);
          ++runs;
          if (!r.ok && ++failures <= 5) {
            ADD_FAILURE() << algoName(s.algo) << " " << collectiveName(s.coll) << " " << s.what << ": "
                          << describe(cfg) << ": " << r.error;
          }
        }
      }
    }
  }
  return runs;
}

}  // namespace conflux
