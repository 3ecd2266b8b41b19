// netns_sweep: the collective correctness sweep (tests/multiproc/collective_cases.h) on a communicator
// whose ranks span simulated nodes. Run by tests/netns/netns_cluster.py, which sets the launcher
// environment (CONFLUX_RANK/NRANKS/LOCAL_RANK/LOCAL_SIZE/BOOTSTRAP_ADDR/SECRET/HOSTID/SOCKET_IFNAME);
// peers on other nodes are reached over libfabric, peers on the same node over shared memory.
//
//   netns_sweep [--inits N] [COUNT...]      default counts: 0 1 7 1023 65539; --inits: N communicators
//                                           from the environment one after another, each swept
//   netns_sweep --loop COUNT SECONDS [--recover]
//
// Every collective, datatype and op, in and out of place. Exit code 0 when every case passed, 1 otherwise
// (failed cases are printed to stderr by the sweep).
//
// --loop (fault tests, test_faults.py): all-reduces (sum) COUNT floats again and again for SECONDS (the
// ranks agree on the last call), each result checked; prints "netns_sweep: rank R/N: looping (pid P)" after the first call and at the end
// "netns_sweep: rank R/N: done: K calls, slowest T ms" (exit 0). When a call fails it prints
// "netns_sweep: rank R/N: call K failed after T ms: <error>" and exits 3; a wrong result exits 2.
// With --recover a failed call is followed by a new communicator from the same environment (the same
// bootstrap address: the link may come back), retried for up to 60 s, which must all-reduce correctly:
// "netns_sweep: rank R/N: recovered after T ms" and exit 0.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "conflux/conflux.h"
#include "tests/multiproc/collective_cases.h"

namespace {

using Clock = std::chrono::steady_clock;

long long msSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// One in-place sum all-reduce of rank-dependent values (small integers: exact in float), checked on every
// rank; cfxSuccess or the call's error. Sets @p wrong (after printing) when the result is wrong.
// The last element carries @p more (0 or 1) and comes back as the number of ranks that want another
// call, so that ranks whose clocks disagree still stop after the same call.
cfxResult_t checkedAllReduce(cfxComm_t comm, std::vector<float>& buf, int rank, int nranks, bool& more, bool& wrong) {
  const size_t n = buf.size() - 1;
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<float>(rank + static_cast<int>(i % 7));
  buf[n] = more ? 1.0f : 0.0f;
  cfxResult_t rc = cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr);
  if (rc != cfxSuccess) return rc;
  more = buf[n] > 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float want = static_cast<float>(nranks * (nranks - 1) / 2 + nranks * static_cast<int>(i % 7));
    if (buf[i] != want) {
      std::printf("netns_sweep: rank %d/%d: wrong result at %zu: %g, expected %g\n", rank, nranks, i,
                  static_cast<double>(buf[i]), static_cast<double>(want));
      wrong = true;
      return cfxSuccess;
    }
  }
  return cfxSuccess;
}

// After a failed call: a new communicator from the environment, retried while the network is down.
int recover(int rank, int nranks, size_t count) {
  const auto start = Clock::now();
  std::string last;
  while (msSince(start) < 60000) {
    cfxComm_t comm = nullptr;
    if (cfxCommInitFromEnv(&comm) != cfxSuccess) {
      last = cfxGetLastError(nullptr);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    std::vector<float> buf(count + 1);
    bool more = false, wrong = false;
    cfxResult_t rc = checkedAllReduce(comm, buf, rank, nranks, more, wrong);
    if (rc != cfxSuccess) last = cfxGetLastError(comm);
    cfxCommDestroy(comm);
    if (wrong) return 2;
    if (rc == cfxSuccess) {
      std::printf("netns_sweep: rank %d/%d: recovered after %lld ms\n", rank, nranks, msSince(start));
      return 0;
    }
  }
  std::printf("netns_sweep: rank %d/%d: no new communicator within 60 s: %s\n", rank, nranks, last.c_str());
  return 3;
}

int loop(cfxComm_t comm, size_t count, double seconds, bool recovering) {
  int rank = 0, nranks = 0;
  cfxCommUserRank(comm, &rank);
  cfxCommCount(comm, &nranks);
  std::vector<float> buf(count + 1);
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  long long slowest = 0;
  long k = 1;
  for (bool more = true; more; ++k) {
    const auto start = Clock::now();
    more = Clock::now() < end;
    bool wrong = false;
    cfxResult_t rc = checkedAllReduce(comm, buf, rank, nranks, more, wrong);
    const long long ms = msSince(start);
    if (wrong) {
      cfxCommDestroy(comm);
      return 2;
    }
    if (rc != cfxSuccess) {
      std::printf("netns_sweep: rank %d/%d: call %ld failed after %lld ms: %s: %s\n", rank, nranks, k, ms,
                  cfxGetErrorString(rc), cfxGetLastError(comm));
      std::fflush(stdout);
      cfxCommDestroy(comm);
      return recovering ? recover(rank, nranks, count) : 3;
    }
    slowest = std::max(slowest, ms);
    if (k == 1) {
      std::printf("netns_sweep: rank %d/%d: looping (pid %d)\n", rank, nranks, static_cast<int>(getpid()));
      std::fflush(stdout);
    }
  }
  std::printf("netns_sweep: rank %d/%d: done: %ld calls, slowest %lld ms\n", rank, nranks, k - 1, slowest);
  cfxCommDestroy(comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool looping = (argc == 4 || argc == 5) && std::string(argv[1]) == "--loop";
  const bool recovering = argc == 5 && std::string(argv[4]) == "--recover";
  int first = 1, inits = 1;
  if (!looping && argc >= 3 && std::string(argv[1]) == "--inits") {
    inits = std::atoi(argv[2]);
    first = 3;
  }
  std::vector<uint64_t> counts;
  for (int i = first; i < argc && !looping; ++i) counts.push_back(std::strtoull(argv[i], nullptr, 10));
  if (counts.empty()) counts = {0, 1, 7, 1023, 65539};

  for (int n = 0; n < inits; ++n) {
    cfxComm_t comm = nullptr;
    cfxResult_t rc = cfxCommInitFromEnv(&comm);
    if (rc != cfxSuccess) {
      std::fprintf(stderr, "netns_sweep: init %d failed: %s: %s\n", n + 1, cfxGetErrorString(rc), cfxGetLastError(nullptr));
      return 1;
    }
    if (looping) return loop(comm, std::strtoull(argv[2], nullptr, 10), std::strtod(argv[3], nullptr), recovering);
    int rank = 0, nranks = 0;
    cfxCommUserRank(comm, &rank);
    cfxCommCount(comm, &nranks);

    const int failures = conflux::testing::runSweep(comm, conflux::testing::fullSweep(counts));
    cfxResult_t async = cfxSuccess;
    cfxCommGetAsyncError(comm, &async);
    cfxCommDestroy(comm);
    if (failures > 0 || async != cfxSuccess) {
      std::fprintf(stderr, "netns_sweep: rank %d/%d: %d case(s) failed\n", rank, nranks, failures);
      return 1;
    }
    if (n + 1 == inits) std::printf("netns_sweep: rank %d/%d: every case passed\n", rank, nranks);
  }
  return 0;
}
