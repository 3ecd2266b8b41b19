#include "pair_harness.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "tests/common/child_processes.h"


namespace conflux::plugintest {

std::string format(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

void fail(const char* file, int line, const char* cond, const std::string& msg) {
  throw CheckFailure(format("%s:%d: check failed: %s%s", file, line, cond, msg.c_str()));
}

namespace {

void waitFd(int fd, short events) {
  pollfd p{fd, events, 0};
  const int rc = ::poll(&p, 1, 60000);
  if (rc <= 0) throw CheckFailure("peer channel: no progress from the other process in 60 s");
}

}  // namespace

void Channel::send(const void* p, size_t n) {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    waitFd(out_, POLLOUT);
    const ssize_t w = ::write(out_, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw CheckFailure("peer channel: write failed");
    b += w;
    n -= size_t(w);
  }
}

void Channel::recv(void* p, size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    waitFd(in_, POLLIN);
    const ssize_t r = ::read(in_, b, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw CheckFailure("peer channel: the other process went away");
    b += r;
    n -= size_t(r);
  }
}

void Channel::barrier() {
  char token = 'b';
  send(&token, 1);
  recv(&token, 1);
}

int openFds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - 1;  // the directory stream itself
}

namespace {
/// Moves this process into the network namespace named by `variable` (a name under /var/run/netns), when
/// it is set: the cross-namespace runs give the receiver and the sender different simulated nodes.
void enterNetns(const char* variable) {
  const char* name = std::getenv(variable);
  if (name == nullptr || *name == '\0') return;
  const std::string path = std::string("/var/run/netns/") + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    throw CheckFailure(std::string(variable) + "=" + name + ": cannot enter that network namespace");
  }
  ::close(fd);
}
}  // namespace

std::string runPair(const Role& receiver, const Role& sender, int timeoutSeconds) {
  int r2s[2], s2r[2];
  if (::pipe(r2s) != 0 || ::pipe(s2r) != 0) return "pipe failed";
  static const char* const kWho[2] = {"receiver", "sender"};
  conflux::testing::ChildProcesses children(2);  // 0: the receiver, 1: the sender
  children.start([&](int r) {
    const int readFd = r == 0 ? s2r[0] : r2s[0];
    const int writeFd = r == 0 ? r2s[1] : s2r[1];
    for (int fd : {r2s[0], r2s[1], s2r[0], s2r[1]}) {
      if (fd != readFd && fd != writeFd) ::close(fd);
    }
    int code = 0;
    try {
      enterNetns(r == 0 ? "CONFLUX_PLUGIN_TEST_NETNS_RECEIVER" : "CONFLUX_PLUGIN_TEST_NETNS_SENDER");
      Channel ch(readFd, writeFd);
      (r == 0 ? receiver : sender)(ch);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[%s] %s\n", kWho[r], e.what());
      ADD_FAILURE() << e.what();
      code = 1;
    }
    return code;  // ChildProcesses runs LeakSanitizer's check in sanitizer builds
  });
  for (int fd : {r2s[0], r2s[1], s2r[0], s2r[1]}) ::close(fd);

  std::string result;
  for (const conflux::testing::ChildOutcome& o : children.waitAll(std::chrono::seconds(timeoutSeconds))) {
    if (o.ok()) continue;
    const std::string how = o.timedOut ? format("timed out after %d s", timeoutSeconds)
                            : o.signal  ? format("killed by signal %d", o.signal)
                                        : format("exited with %d", o.exitCode);
    result += std::string(kWho[o.rank]) + " " + how + (o.failure.empty() ? "" : " (" + o.failure + ")") + "; ";
  }
  return result;
}

}  // namespace conflux::plugintest
