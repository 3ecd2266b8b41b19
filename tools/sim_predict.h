// conflux-sim predict (tools/sim_predict.cc).
#pragma once

namespace conflux {

/// Runs `conflux-sim predict` on its own arguments (argv[0] is "predict"); returns the exit status.
int simPredict(int argc, char** argv);

}  // namespace conflux
