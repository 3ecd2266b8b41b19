// The plan simulator: runs the plans of every virtual rank of one collective inside one process,
// exactly under the round semantics of plan.h, and checks both the schedule and the data.
//
// Every virtual rank owns real byte buffers: send and recv per call (aliased as the collective defines
// when in place), private scratch, and a staging segment of two areas of stagingBytes each (call c of
// the sequence uses area (epoch & 1), epoch counting the earlier calls whose plans use staging, like
// the executor). Ranks advance in a seeded random order, one action (post a round's communication, or
// finish it and run its local operations) per rank per step:
//   - communication operations of a round are posted together; a Send completes only when the matching
//     Recv is posted (rendezvous, no buffering; FIFO per direction), then the data moves; a Barrier
//     completes when every rank has posted it;
//   - local operations run in order once all of the round's communication completed.
// Reported, each with rank, call, round, op index, buffer and byte range where they apply:
//   deadlock (no rank can progress), Send/Recv size mismatch, malformed ops, out-of-bounds or misaligned
//   references, writes to the send buffer, references to another rank's send/recv/scratch (only staging
//   is shared), conflicting operations within a round (rule 3, on the real aliased memory), staging
//   races (a read of bytes another rank wrote, or a write of bytes another rank read or wrote, with no
//   Barrier in between), staging plans without a Barrier, and wrong results.
// Elements are unsigned integers of eltSize bytes (1, 2, 4 or 8); Sum and Prod wrap, Avg is the
// wrapping sum divided (integer division) by nranks in Finalize, the bitwise ops are bitwise, and
// PreMulSum multiplies every read of a rank's own send buffer by that rank's odd scalar (as the executor
// does), so a plan that reads an input twice after an in-place write, or scales it twice, is caught. Every rank's output is compared with
// a directly computed reference; Reduce's non-roots and every out-of-place send buffer must be left
// unchanged.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "algorithms/algorithms.h"
#include "algorithms/plan.h"
#include "core/types.h"

namespace conflux {

/// One simulated collective, run `calls` times in a row.
struct SimConfig {
  PlanParams params;        ///< The collective's parameters; `rank` is ignored (set per virtual rank).
  RedOp op = RedOp::Sum;    ///< Element operation for reductions (ignored otherwise).
  int calls = 2;            ///< Consecutive calls (>= 2 exercises staging reuse across calls).
  bool inPlace = false;     ///< Alias send and recv as the collective's in-place form defines.
  uint64_t seed = 1;        ///< Seeds the buffer contents and the scheduling order.
};

/// The outcome: ok, or the first problem found, described precisely.
struct SimResult {
  bool ok = true;
  std::string error;
  uint64_t rounds = 0;     ///< Rounds completed, summed over ranks and calls.
  uint64_t messages = 0;   ///< Send/Recv pairs matched.
  uint64_t bytes = 0;      ///< Bytes moved by messages.
  uint64_t barriers = 0;   ///< Barriers completed.
};

/// Builds one rank's plan (params.rank is set).
using PlanFactory = std::function<Plan(const PlanParams&)>;

/// Simulates `algo`'s plans; a buildPlan error is reported as a failed result.
SimResult simulate(const SimConfig& cfg, Algo algo);

/// Simulates arbitrary plans (e.g. hand-made ones in tests).
SimResult simulate(const SimConfig& cfg, const PlanFactory& makePlan);

/// One line describing the configuration, e.g. "allreduce n=5 count=7 elt=4 root=0 op=avg ...".
std::string describe(const SimConfig& cfg);

}  // namespace conflux
