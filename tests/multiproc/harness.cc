#include "tests/multiproc/harness.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

namespace conflux::testing {
namespace {

struct SharedId {
  std::atomic<int> state;  // 0 = not ready, 1 = ready, 2 = rank 0 failed
  cfxUniqueId id;
};

[[noreturn]] void childMain(int rank, int nranks, SharedId* shared, const RankBody& body, const RunOptions& opts) {
  for (const auto& [k, v] : opts.env) setenv(k.c_str(), v.c_str(), 1);
  cfxUniqueId id;
  if (rank == 0) {
    if (cfxGetUniqueId(&shared->id) != cfxSuccess) {
      fprintf(stderr, "rank 0: cfxGetUniqueId failed: %s\n", cfxGetLastError(nullptr));
      shared->state.store(2);
      _exit(3);
    }
    shared->state.store(1);
  } else {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (shared->state.load() == 0) {
      if (std::chrono::steady_clock::now() > deadline) _exit(4);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (shared->state.load() != 1) _exit(5);
  }
  std::memcpy(&id, &shared->id, sizeof id);
  int rc = body(rank, nranks, id);
  if (::testing::Test::HasFailure() && rc == 0) rc = 1;
  fflush(stdout);
  fflush(stderr);
  _exit(rc);
}

}  // namespace

bool lastErrorMentions(const std::string& what) {
  const std::string msg = cfxGetLastError(nullptr);
  const bool ok = msg.find(what) != std::string::npos;
  if (!ok) fprintf(stderr, "last error '%s' does not mention '%s'\n", msg.c_str(), what.c_str());
  return ok;
}

std::vector<RankOutcome> runRanks(int nranks, const RankBody& body, const RunOptions& opts) {
  void* mem = mmap(nullptr, sizeof(SharedId), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    ADD_FAILURE() << "mmap failed";
    return {};
  }
  auto* shared = new (mem) SharedId();
  shared->state.store(0);
  fflush(stdout);
  fflush(stderr);
  std::vector<RankOutcome> out(nranks);
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) childMain(r, nranks, shared, body, opts);
    out[r].rank = r;
    out[r].pid = pid;
  }
  if (opts.whileRunning) {
    std::vector<int> pids;
    for (const auto& o : out) pids.push_back(o.pid);
    opts.whileRunning(pids);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opts.timeoutSec);
  int remaining = nranks;
  std::vector<bool> done(nranks, false);
  while (remaining > 0) {
    for (int r = 0; r < nranks; ++r) {
      if (done[r]) continue;
      int status = 0;
      pid_t w = waitpid(out[r].pid, &status, WNOHANG);
      if (w == out[r].pid) {
        done[r] = true;
        --remaining;
        if (WIFEXITED(status)) out[r].exitCode = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) out[r].signal = WTERMSIG(status);
      }
    }
    if (remaining == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < nranks; ++r) {
        if (!done[r]) {
          kill(out[r].pid, SIGKILL);
          waitpid(out[r].pid, nullptr, 0);
          out[r].timedOut = true;
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  munmap(mem, sizeof(SharedId));
  return out;
}

bool allSucceeded(const std::vector<RankOutcome>& outcomes) {
  bool ok = !outcomes.empty();
  for (const auto& o : outcomes) {
    if (o.exitCode != 0) {
      ok = false;
      ADD_FAILURE() << "rank " << o.rank << " (pid " << o.pid << ") "
                    << (o.timedOut ? "timed out" : o.signal ? "killed by signal " + std::to_string(o.signal)
                                                            : "exited with " + std::to_string(o.exitCode));
    }
  }
  return ok;
}

std::vector<std::string> shmFiles(const std::string& prefix) {
  std::vector<std::string> names;
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) names.emplace_back(e->d_name);
  }
  closedir(d);
  return names;
}

void simulateNode(int node) {
  setenv("CONFLUX_HOSTID", ("node" + std::to_string(node)).c_str(), 1);
  setenv("CONFLUX_OFI_ADDR", "127.0.0.1", 1);
  setenv("CONFLUX_TCP_ADDR", "127.0.0.1", 1);
}

}  // namespace conflux::testing
