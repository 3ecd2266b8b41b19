// Runs a test body in N real processes (tests/common/child_processes.h), one per rank, with a unique id
// made by rank 0 and handed to the others through shared memory set up before the fork. Each child exits
// with 0 when its body reported no failure; the parent collects how each ended, with its failures'
// text, within a deadline, and kills stragglers.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "conflux/conflux.h"
#include "tests/common/child_processes.h"

namespace conflux::testing {

using RankOutcome = ChildOutcome;

struct RunOptions {
  int timeoutSec = 240;
  /// Environment set in every child before the body runs (name, value).
  std::vector<std::pair<std::string, std::string>> env;
  /// Called in the parent with the children's pids once all are running (e.g. to kill one).
  std::function<void(const std::vector<int>& pids)> whileRunning;
};

/// body(rank, nranks, id) runs in each child; its return value (0 = ok) and gtest failures set the exit code.
using RankBody = std::function<int(int rank, int nranks, const cfxUniqueId& id)>;

std::vector<RankOutcome> runRanks(int nranks, const RankBody& body, const RunOptions& opts = {});

/// Ranks that have a communicator, counted in memory the forked ranks share with the parent: a rank calls
/// markInitialized() after its init, and a whileRunning hook waits for all of them before it injects a
/// fault, so that the fault lands in the calls however slow init is (under the sanitizers on a loaded
/// machine a fixed delay was sometimes shorter than init). resetInitialized() before runRanks.
void resetInitialized();
void markInitialized();
/// Waits until `nranks` ranks called markInitialized() (at most `limitMs`); true when they all did.
bool waitInitialized(int nranks, int limitMs = 60000);
/// A whileRunning hook (it resets the count itself, so make it before runRanks): once every rank called
/// markInitialized() and `delayMs` more passed, sends `sig` to rank `victim`; a SIGSTOP is followed by a
/// SIGKILL `stopMs` later, when the survivors are done with the stopped rank.
std::function<void(const std::vector<int>& pids)> faultAfterInit(int victim, int sig, int delayMs, int stopMs = 0);

/// Makes this process (a forked rank, before cfxCommInitRank) a rank of simulated node `node`: its own
/// node identity, so ranks of other nodes are reached through libfabric (tcp over loopback), not shared
/// memory. Needs a build with libfabric.
void simulateNode(int node);

/// True when the calling thread's last Conflux error message contains `what` (else says what it was on
/// stderr): how the tests check that an error names its argument.
bool lastErrorMentions(const std::string& what);

/// Names of files in /dev/shm whose name starts with `prefix`.
std::vector<std::string> shmFiles(const std::string& prefix = "conflux-");

}  // namespace conflux::testing
