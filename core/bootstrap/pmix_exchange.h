// The unique id through PMIx (cfxCommInitFromEnv under srun --mpi=pmix, mpirun and other PMIx launchers):
// rank 0 puts the encoded id into the job's key-value space, every rank fences, and the others get it.
// No port is agreed beforehand and no file is shared: the launcher's PMIx servers carry the id.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace conflux::bootstrap {

/// True when this build links PMIx (CONFLUX_WITH_PMIX).
bool pmixBuiltIn();

/// Shares `value` from rank 0 of the PMIx namespace this process belongs to with every rank of it, under
/// a key that names the `exchange`-th exchange of this process (ranks call these in the same order).
/// Collective over the namespace. Returns rank 0's value (rank 0: `value`), or nullopt when PMIx cannot be
/// initialised here (no server reachable), PMIx's rank for this process is not `expectedRank`, or its job
/// has not `expectedSize` processes (a stale environment, a communicator of part of the job): the caller
/// falls back to another rendezvous. PMIx is initialised for the exchange and finalized after it. Throws
/// Error(Timeout) when the fence or the get does not complete within `timeout`, Error(SystemError) for other PMIx
/// failures, naming the call and PMIx's error string.
std::optional<std::string> pmixShareFromRankZero(const std::string& value, int expectedRank, int expectedSize,
                                                 unsigned exchange, std::chrono::milliseconds timeout);

}  // namespace conflux::bootstrap
