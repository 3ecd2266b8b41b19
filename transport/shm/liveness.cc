// PeerLiveness: pidfd polling with a procfs fallback (see liveness.h).
#include "transport/shm/liveness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/log.h"

namespace conflux::shm {

PeerLiveness::~PeerLiveness() {
  for (const Watched& w : watched_)
    if (w.pidfd >= 0) ::close(w.pidfd);
}

int PeerLiveness::openPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

void PeerLiveness::watch(const std::vector<pid_t>& pids) {
  for (size_t i = 0; i < pids.size(); ++i) {
    if (pids[i] <= 0) continue;
    int fd = openPidfd(pids[i]);
    if (fd < 0) {
      CFX_INFO(kShm, "shm: pidfd_open(%d) failed (%s); watching local rank %zu through /proc", int(pids[i]),
               std::strerror(errno), i);
    } else {
      // Pidfds are O_CLOEXEC by default; be explicit for older kernels' sake.
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    watched_.push_back({static_cast<int>(i), pids[i], fd});
  }
}

std::vector<int> PeerLiveness::allDead() {
  // One poll() for all pidfds (cheap: no blocking, one syscall), then the fallback ones one by one.
  std::vector<int> dead;
  std::vector<pollfd> fds;
  fds.reserve(watched_.size());
  for (const Watched& w : watched_)
    if (w.pidfd >= 0) fds.push_back({w.pidfd, POLLIN, 0});
  if (!fds.empty() && ::poll(fds.data(), fds.size(), 0) > 0) {
    size_t k = 0;
    for (const Watched& w : watched_) {
      if (w.pidfd < 0) continue;
      if (fds[k++].revents & (POLLIN | POLLHUP | POLLERR)) dead.push_back(w.localRank);
    }
  }
  for (const Watched& w : watched_)
    if (w.pidfd < 0 && exitedByProcfs(w.pid)) dead.push_back(w.localRank);
  return dead;
}

char PeerLiveness::procfsState(pid_t pid) {
  // The state letter follows the parenthesized command name, which may itself contain ')' and spaces,
  // so search from the last ')'.
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 'X' : '?';
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return '?';
  buf[n] = '\0';
  const char* paren = std::strrchr(buf, ')');
  if (paren == nullptr || paren[1] != ' ') return '?';
  return paren[2];
}

bool PeerLiveness::exitedByProcfs(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;  // EPERM means it exists
  const char state = procfsState(pid);  // a zombie still answers kill()
  return state == 'Z' || state == 'X' || state == 'x';
}

std::vector<int> PeerLiveness::allStopped() const {
  std::vector<int> stopped;
  for (const Watched& w : watched_) {
    const char state = procfsState(w.pid);
    if (state == 'T' || state == 't') stopped.push_back(w.localRank);
  }
  return stopped;
}

}  // namespace conflux::shm
