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
#include <new>
#include <thread>

#include <gtest/gtest.h>

namespace conflux::testing {
namespace {

struct SharedId {
  std::atomic<int> state;  // 0 = not ready, 1 = ready, 2 = rank 0 failed
  cfxUniqueId id;
};

/// A child's rank: rank 0 makes the unique id and hands it over through `shared`; then the body runs.
int rankMain(int rank, int nranks, SharedId* shared, const RankBody& body, const RunOptions& opts) {
  for (const auto& [k, v] : opts.env) setenv(k.c_str(), v.c_str(), 1);
  cfxUniqueId id;
  if (rank == 0) {
    if (cfxGetUniqueId(&shared->id) != cfxSuccess) {
      ADD_FAILURE() << "rank 0: cfxGetUniqueId failed: " << cfxGetLastError(nullptr);
      shared->state.store(2);
      return 3;
    }
    shared->state.store(1);
  } else {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (shared->state.load() == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "rank " << rank << ": no unique id from rank 0 within 60 s";
        return 4;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (shared->state.load() != 1) return 5;  // rank 0 said why
  }
  std::memcpy(&id, &shared->id, sizeof id);
  return body(rank, nranks, id);
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
  std::vector<RankOutcome> out;
  {
    ChildProcesses children(nranks);
    children.start([&](int rank) { return rankMain(rank, nranks, shared, body, opts); });
    if (opts.whileRunning) opts.whileRunning(children.pids());
    out = children.waitAll(std::chrono::seconds(opts.timeoutSec));
  }
  munmap(mem, sizeof(SharedId));
  return out;
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

namespace {

// Mapped when the test program starts, before any rank is forked, so that every rank shares it.
std::atomic<int>* const initializedCounter = [] {
  void* p = mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::abort();
  return new (p) std::atomic<int>(0);
}();

std::atomic<int>& initializedRanks() { return *initializedCounter; }

}  // namespace

void resetInitialized() { initializedRanks().store(0); }

void markInitialized() { initializedRanks().fetch_add(1); }

bool waitInitialized(int nranks, int limitMs) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(limitMs);
  while (initializedRanks().load() < nranks) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::function<void(const std::vector<int>& pids)> faultAfterInit(int victim, int sig, int delayMs, int stopMs) {
  resetInitialized();
  return [=](const std::vector<int>& pids) {
    EXPECT_TRUE(waitInitialized(int(pids.size()))) << "not every rank made its communicator";
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    kill(pids[size_t(victim)], sig);
    if (sig == SIGSTOP) {
      std::this_thread::sleep_for(std::chrono::milliseconds(stopMs));
      kill(pids[size_t(victim)], SIGKILL);
    }
  };
}

void simulateNode(int node) {
  setenv("CONFLUX_HOSTID", ("node" + std::to_string(node)).c_str(), 1);
  setenv("CONFLUX_OFI_ADDR", "127.0.0.1", 1);
  setenv("CONFLUX_TCP_ADDR", "127.0.0.1", 1);
}

}  // namespace conflux::testing
