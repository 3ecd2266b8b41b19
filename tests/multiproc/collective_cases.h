// One rank's side of the collective correctness sweep: runs every case on one communicator and checks
// every output element against the reference.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "conflux/conflux.h"

namespace conflux::testing {

enum class Coll { AllReduce, Reduce, Broadcast, AllGather, ReduceScatter, AllToAll };

struct Sweep {
  std::vector<Coll> colls;
  std::vector<cfxDataType_t> types;
  std::vector<cfxRedOp_t> ops;
  std::vector<uint64_t> counts;
  bool inPlaceToo = true;
  /// Where buffers live: private heap memory, cfxMemAlloc memory (direct algorithms), cfxMemAlloc on
  /// even ranks only (mixed: every rank must fall back to staging), or CUDA device memory (builds with
  /// CUDA: the calls go on a stream, and the checks read the results back).
  enum class Memory { Private, Shared, SharedOnEvenRanks, Device } memory = Memory::Private;
};

/// Sweep covering every collective, datatype and op, in and out of place, over `counts`.
Sweep fullSweep(std::vector<uint64_t> counts);

/// Runs the sweep on `comm`; returns the number of failed cases (details printed to stderr).
int runSweep(cfxComm_t comm, const Sweep& sweep);

/// Runs `cases` cases drawn at random from `seed` (every rank passing the same seed runs the same cases,
/// in the same order): any collective, datatype and op (PreMulSum included), counts up to `maxCount`
/// (log-uniform, 0 now and then), in or out of place, any root. Each is checked like the sweep's. Calls
/// `every(done)` after every `everyK` cases (0: never). Returns the number of failed cases.
int runRandomCases(cfxComm_t comm, uint64_t seed, int cases, uint64_t maxCount, int everyK = 0,
                   const std::function<void(int done)>& every = {});

/// A rank's whole part (a runRanks body): joins the communicator, runs the sweep, destroys it. Returns
/// 0 when every case passed, 1 when one failed, 2 when the communicator could not be made.
int sweepOnNewComm(int rank, int nranks, const cfxUniqueId& id, const Sweep& sweep);

}  // namespace conflux::testing
