// Liveness of local peer processes: pidfd_open + poll (a pidfd becomes readable when the process exits,
// zombie or not), falling back to kill(pid, 0) and /proc/<pid>/stat where pidfd_open is unavailable
// (kernels before 5.3, seccomp filters). Peers in another pid namespace cannot be watched reliably and
// are skipped (never reported dead).
#pragma once

#include <sys/types.h>

#include <vector>

namespace conflux::shm {

class PeerLiveness {
 public:
  PeerLiveness() = default;
  PeerLiveness(const PeerLiveness&) = delete;
  PeerLiveness& operator=(const PeerLiveness&) = delete;
  ~PeerLiveness();  ///< Closes the pidfds.

  /// Starts watching pids[i] for local rank i; entries <= 0 (self, unwatchable) are skipped.
  void watch(const std::vector<pid_t>& pids);

  /// Every watched local rank whose process has exited (unordered). Never blocks.
  std::vector<int> allDead();

  /// Every watched local rank whose process is stopped (SIGSTOP, a debugger: 'T' or 't' in
  /// /proc/<pid>/stat). Never blocks; for naming the culprit of a timeout, not on any fast path.
  std::vector<int> allStopped() const;

  /// The state letter of /proc/<pid>/stat ('R', 'S', 'T', 'Z', ...), 'X' when there is no such process,
  /// '?' when it cannot be read.
  static char procfsState(pid_t pid);

  /// Fallback check without a pidfd: true when `pid` no longer exists or is a zombie/dead ('Z'/'X' in
  /// /proc/<pid>/stat). Subject to pid reuse, hence only a fallback.
  static bool exitedByProcfs(pid_t pid);

  /// pidfd_open(pid) through syscall(2) (glibc may lack the wrapper); -1 with errno on failure.
  static int openPidfd(pid_t pid);

 private:
  struct Watched {
    int localRank;
    pid_t pid;
    int pidfd;  ///< -1: use the procfs fallback.
  };
  std::vector<Watched> watched_;
};

}  // namespace conflux::shm
