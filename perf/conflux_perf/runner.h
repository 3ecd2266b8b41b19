// conflux-perf: the measurement itself, on one rank. Same schedule as nccl-tests: warm-up calls at the
// largest and the smallest size, then for each size and each of out-of-place / in-place: one untimed
// call, a barrier, `iters` timed calls (each call's buffers shifted through the allocation, as nccl-tests
// does to avoid measuring a hot cache), the time per call combined over ranks (-a), then -c checked calls.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "options.h"

namespace cfxperf {

struct RankSetup {
  RankSetup() = default;
  /// Destroys the backends last to first: a comparison backend may use the first one's communicator.
  ~RankSetup() {
    while (!backends.empty()) backends.pop_back();
  }
  RankSetup(const RankSetup&) = delete;
  RankSetup& operator=(const RankSetup&) = delete;
  std::vector<std::unique_ptr<Backend>> backends;  ///< [0]: benchmarked; [1]: comparison (--compare)
  int localRank = 0;                              ///< this rank's index on its node
  std::string launch;                             ///< how the ranks were started (for the header)
  std::string commandLine;                        ///< the user's command line
};

/// Runs every sweep on this rank; rank 0 prints the report (and writes -J). Returns the exit status:
/// 0 when every checked result was right. Throws std::runtime_error when a call or the setup fails.
int runBenchmark(const Options& opts, RankSetup& setup);

}  // namespace cfxperf
