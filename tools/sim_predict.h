// conflux-sim predict (tools/sim_predict.cc).
#pragma once

#include <optional>
#include <string_view>

#include "core/types.h"

namespace conflux {

/// The collectives conflux-sim costs (project and predict), by collectiveName; nullopt for another name.
inline std::optional<Collective> simCollective(std::string_view name) {
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::Broadcast}) {
    if (collectiveName(c) == name) return c;
  }
  return std::nullopt;
}

/// The most ranks conflux-sim costs (nodes x ranks per node): the model walks every rank.
inline constexpr int kMaxSimRanks = 1 << 20;

/// Runs `conflux-sim predict` on its own arguments (argv[0] is "predict"); returns the exit status.
int simPredict(int argc, char** argv);

}  // namespace conflux
