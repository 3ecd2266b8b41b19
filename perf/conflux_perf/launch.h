// conflux-perf: how the ranks come to exist, and the communicators they use.
//  --ranks N, Conflux only: fork N local ranks; rank 0 makes the unique id and hands it over through a
//      shared anonymous page created before the fork.
//  --ranks N with --backend mpi or --compare mpi: re-execute under mpirun (-np N, --bind-to core with
//      --pin) with the same arguments minus --ranks.
//  No --ranks: under MPI (mpi backend in use) ranks come from MPI_COMM_WORLD and the Conflux
//      communicator from cfxCommInitFromMpi; otherwise from the launcher's environment
//      (cfxCommInitFromEnv), or a single rank when no launcher variables are set.
#pragma once

#include <functional>

#include "conflux/conflux.h"
#include "options.h"

namespace cfxperf {

/// Throws std::runtime_error "<what> failed: <result>: <last error>" unless r is cfxSuccess.
void checkResult(cfxResult_t r, const char* what);

/// What one forked rank runs: `makeComm()` creates the communicator of all the forked ranks (rank 0
/// makes the unique id and shares it through a page mapped before the fork). Returns the exit status.
using RankBody = std::function<int(int rank, const std::function<cfxComm_t()>& makeComm)>;

/// Forks `ranks` local processes running `body` and waits for them. Returns the worst exit status; once
/// one rank fails, the others get 60 s to notice before they are killed. An exception in a rank is
/// printed with its rank and counts as exit status 1.
int forkRanks(int ranks, const RankBody& body);

/// Starts the ranks and runs the benchmark; returns the process exit status.
int launchAndRun(const Options& opts, int argc, char** argv);

}  // namespace cfxperf
