// netns_sweep: the collective correctness sweep (tests/multiproc/collective_cases.h) on a communicator
// whose ranks span simulated nodes. Run by tests/netns/netns_cluster.py, which sets the launcher
// environment (CONFLUX_RANK/NRANKS/LOCAL_RANK/LOCAL_SIZE/BOOTSTRAP_ADDR/SECRET/HOSTID/SOCKET_IFNAME);
// peers on other nodes are reached over libfabric, peers on the same node over shared memory.
//
//   netns_sweep [COUNT...]      default counts: 0 1 7 1023 65539
//   netns_sweep --loop COUNT SECONDS
//
// Every collective, datatype and op, in and out of place. Exit code 0 when every case passed, 1 otherwise
// (failed cases are printed to stderr by the sweep).
//
// --loop (fault tests, test_faults.py): all-reduces COUNT floats again and again for SECONDS; prints
// "netns_sweep: rank R/N: looping" after the first call and, when a call fails,
// "netns_sweep: rank R/N: call K failed after T ms: <error>" and exits 3. Exit 0 when no call failed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "conflux/conflux.h"
#include "tests/multiproc/collective_cases.h"

namespace {

int loop(cfxComm_t comm, size_t count, double seconds) {
  using Clock = std::chrono::steady_clock;
  int rank = 0, nranks = 0;
  cfxCommUserRank(comm, &rank);
  cfxCommCount(comm, &nranks);
  std::vector<float> buf(count, 1.0f);
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  for (long k = 1; Clock::now() < end; ++k) {
    const auto start = Clock::now();
    cfxResult_t rc = cfxAllReduce(buf.data(), buf.data(), count, cfxFloat32, cfxMax, comm, nullptr);
    if (rc != cfxSuccess) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      std::printf("netns_sweep: rank %d/%d: call %ld failed after %lld ms: %s: %s\n", rank, nranks, k,
                  static_cast<long long>(ms), cfxGetErrorString(rc), cfxGetLastError(comm));
      std::fflush(stdout);
      cfxCommDestroy(comm);
      return 3;
    }
    if (k == 1) {
      std::printf("netns_sweep: rank %d/%d: looping\n", rank, nranks);
      std::fflush(stdout);
    }
  }
  cfxCommDestroy(comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool looping = argc == 4 && std::string(argv[1]) == "--loop";
  std::vector<uint64_t> counts;
  for (int i = 1; i < argc && !looping; ++i) counts.push_back(std::strtoull(argv[i], nullptr, 10));
  if (counts.empty()) counts = {0, 1, 7, 1023, 65539};

  cfxComm_t comm = nullptr;
  cfxResult_t rc = cfxCommInitFromEnv(&comm);
  if (rc != cfxSuccess) {
    std::fprintf(stderr, "netns_sweep: init failed: %s: %s\n", cfxGetErrorString(rc), cfxGetLastError(nullptr));
    return 1;
  }
  if (looping) return loop(comm, std::strtoull(argv[2], nullptr, 10), std::strtod(argv[3], nullptr));
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
  std::printf("netns_sweep: rank %d/%d: every case passed\n", rank, nranks);
  return 0;
}
