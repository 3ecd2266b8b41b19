// conflux-sim predict (tools/sim_predict.cc).
#pragma once

namespace conflux {

/// The most ranks conflux-sim costs (nodes x ranks per node): the model walks every rank.
inline constexpr int kMaxSimRanks = 1 << 20;

/// Runs `conflux-sim predict` on its own arguments (argv[0] is "predict"); returns the exit status.
int simPredict(int argc, char** argv);

}  // namespace conflux
