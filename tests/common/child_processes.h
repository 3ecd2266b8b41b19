// The one way tests start ranks as processes: fork `n` children, run a body in each, collect how each
// ended, with the child's own words for why it failed (its gtest failures, an uncaught exception), and
// never wait past a deadline (stragglers are killed). The multiprocess harness (tests/multiproc), the
// shared-memory and libfabric tests (tests/unit) start their ranks through it; threads as ranks use
// tests/unit/thread_group.h.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace conflux::testing {

/// How one child ended.
struct ChildOutcome {
  int rank = 0;
  int pid = 0;
  int exitCode = -1;     ///< its exit status; -1 when killed by a signal or timed out
  int signal = 0;        ///< the signal that ended it, else 0
  bool timedOut = false; ///< it outlived the deadline and was killed
  std::string failure;   ///< what the child reported: gtest failures ("file:line: text"), an exception
  bool ok() const { return exitCode == 0; }
  /// "rank 2 (pid 123) exited with 1: test_x.cc:40: Expected ...", for failure messages.
  std::string describe() const;
};

/// Forked children, one per rank. Destroying it kills and reaps the children still running.
class ChildProcesses {
 public:
  explicit ChildProcesses(int n) : n_(n) {}
  ~ChildProcesses();
  ChildProcesses(const ChildProcesses&) = delete;
  ChildProcesses& operator=(const ChildProcesses&) = delete;

  /// Forks the children; child r runs body(r) and exits with its return value, made nonzero (1) by a gtest
  /// failure or, in sanitizer builds, a leak, and 2 by an uncaught exception. Failures, leaks and exceptions
  /// also travel back (ChildOutcome::failure).
  void start(const std::function<int(int rank)>& body);
  int size() const { return n_; }
  pid_t pid(int rank) const { return children_[size_t(rank)].pid; }
  std::vector<int> pids() const;
  /// Waits for child `rank` until `limit` has passed, then kills it.
  ChildOutcome wait(int rank, std::chrono::milliseconds limit);
  /// Waits for every child still running, one deadline for all.
  std::vector<ChildOutcome> waitAll(std::chrono::milliseconds limit);

 private:
  struct Child {
    pid_t pid = -1;
    int reportFd = -1;  // read end of the child's failure pipe
    bool reaped = false;
    ChildOutcome outcome;
  };
  /// Reaps `c` if it has ended (or kills it when `kill`); true once reaped.
  bool reap(Child& c, bool kill);

  int n_;
  std::vector<Child> children_;
};

/// True when every outcome is ok; otherwise adds a gtest failure with each bad child's describe().
bool allSucceeded(const std::vector<ChildOutcome>& outcomes);

}  // namespace conflux::testing
