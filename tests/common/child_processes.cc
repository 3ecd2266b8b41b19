#include "tests/common/child_processes.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <thread>

#include "tests/common/address_sanitizer.h"

#if CONFLUX_TEST_ASAN
#include <sanitizer/lsan_interface.h>

extern "C" __attribute__((visibility("default"))) const char* __lsan_default_suppressions() {
  return CONFLUX_TEST_LSAN_SUPPRESSIONS;
}
#endif

namespace conflux::testing {
namespace {

constexpr size_t kMaxReport = 4096;  // what a child sends back (a pipe holds more; the rest is on its stderr)

/// In a child: sends each gtest failure, as "file:line: message", to the parent through `fd`.
class FailureToParent : public ::testing::EmptyTestEventListener {
 public:
  explicit FailureToParent(int fd) : fd_(fd) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    send(std::string(r.file_name() ? r.file_name() : "?") + ":" + std::to_string(r.line_number()) + ": " + r.message());
  }
  void send(const std::string& text) {
    if (sent_ >= kMaxReport) return;
    std::string piece;
    if (sent_ != 0) piece.push_back('\n');
    piece.append(text, 0, kMaxReport - sent_);
    sent_ += piece.size();
    if (::write(fd_, piece.data(), piece.size()) < 0) sent_ = kMaxReport;
  }

 private:
  int fd_;
  size_t sent_ = 0;
};

[[noreturn]] void childMain(int rank, int fd, const std::function<int(int)>& body) {
  auto* report = new FailureToParent(fd);  // gtest owns it; the child _exits
  ::testing::UnitTest::GetInstance()->listeners().Append(report);
  int rc = 2;
  try {
    rc = body(rank);
    if (rc == 0 && ::testing::Test::HasFailure()) rc = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] uncaught exception: %s\n", rank, e.what());
    report->send(std::string("uncaught exception: ") + e.what());
  } catch (...) {
    report->send("uncaught exception of an unknown type");
  }
#if CONFLUX_TEST_ASAN
  // _exit skips LeakSanitizer's exit-time check: run it here, so that a child's leaks fail its test too.
  if (rc == 0 && __lsan_do_recoverable_leak_check() != 0) {
    report->send("LeakSanitizer found leaks (its report is on this child's stderr)");
    rc = 1;
  }
#endif
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(rc);
}

std::string readAll(int fd) {
  std::string text;
  char buf[1024];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, size_t(n));
  }
  return text;
}

}  // namespace

std::string ChildOutcome::describe() const {
  std::string s = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ") " +
                  (timedOut ? "timed out and was killed"
                   : signal ? "was killed by signal " + std::to_string(signal)
                            : "exited with " + std::to_string(exitCode));
  return failure.empty() ? s : s + ": " + failure;
}

ChildProcesses::~ChildProcesses() {
  for (Child& c : children_) reap(c, /*kill=*/true);
}

void ChildProcesses::start(const std::function<int(int rank)>& body) {
  for (int r = 0; r < n_; ++r) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe2 failed";
      return;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      childMain(r, fds[1], body);
    }
    ::close(fds[1]);
    // Read without blocking: a grandchild the body started may still hold the write end.
    ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    Child c;
    c.pid = pid;
    c.reportFd = fds[0];
    c.outcome.rank = r;
    c.outcome.pid = pid;
    if (pid < 0) {
      ::close(fds[0]);
      c.reportFd = -1;
      c.reaped = true;
      c.outcome.failure = "fork failed";
    }
    children_.push_back(c);
  }
}

std::vector<int> ChildProcesses::pids() const {
  std::vector<int> out;
  for (const Child& c : children_) out.push_back(c.pid);
  return out;
}

bool ChildProcesses::reap(Child& c, bool kill) {
  if (c.reaped) return true;
  int status = 0;
  pid_t w = ::waitpid(c.pid, &status, WNOHANG);
  if (w != c.pid) {
    if (!kill) return false;
    ::kill(c.pid, SIGKILL);
    w = ::waitpid(c.pid, &status, 0);
    c.outcome.timedOut = true;
  }
  c.reaped = true;
  if (w == c.pid && WIFEXITED(status) && !c.outcome.timedOut) c.outcome.exitCode = WEXITSTATUS(status);
  if (w == c.pid && WIFSIGNALED(status) && !c.outcome.timedOut) c.outcome.signal = WTERMSIG(status);
  // The child has gone: what it sent is in the pipe.
  if (c.reportFd >= 0) {
    c.outcome.failure = readAll(c.reportFd);
    ::close(c.reportFd);
    c.reportFd = -1;
  }
  return true;
}

ChildOutcome ChildProcesses::wait(int rank, std::chrono::milliseconds limit) {
  Child& c = children_[size_t(rank)];
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!reap(c, /*kill=*/std::chrono::steady_clock::now() >= deadline)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return c.outcome;
}

std::vector<ChildOutcome> ChildProcesses::waitAll(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const bool late = std::chrono::steady_clock::now() >= deadline;
    bool all = true;
    for (Child& c : children_) all = reap(c, late) && all;
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::vector<ChildOutcome> out;
  for (const Child& c : children_) out.push_back(c.outcome);
  return out;
}

bool allSucceeded(const std::vector<ChildOutcome>& outcomes) {
  bool ok = !outcomes.empty();
  for (const ChildOutcome& o : outcomes) {
    if (o.ok()) continue;
    ok = false;
    ADD_FAILURE() << o.describe();
  }
  return ok;
}

}  // namespace conflux::testing
