// netns_sweep: the collective correctness sweep (tests/multiproc/collective_cases.h) on a communicator
// whose ranks span simulated nodes. Run by tests/netns/netns_cluster.py, which sets the launcher
// environment (CONFLUX_RANK/NRANKS/LOCAL_RANK/LOCAL_SIZE/BOOTSTRAP_ADDR/SECRET/HOSTID/SOCKET_IFNAME);
// peers on other nodes are reached over libfabric, peers on the same node over shared memory.
//
//   netns_sweep [COUNT...]      default counts: 0 1 7 1023 65539
//
// Every collective, datatype and op, in and out of place. Exit code 0 when every case passed, 1 otherwise
// (failed cases are printed to stderr by the sweep).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "conflux/conflux.h"
#include "tests/multiproc/collective_cases.h"

int main(int argc, char** argv) {
  std::vector<uint64_t> counts;
  for (int i = 1; i < argc; ++i) counts.push_back(std::strtoull(argv[i], nullptr, 10));
  if (counts.empty()) counts = {0, 1, 7, 1023, 65539};

  cfxComm_t comm = nullptr;
  cfxResult_t rc = cfxCommInitFromEnv(&comm);
  if (rc != cfxSuccess) {
    std::fprintf(stderr, "netns_sweep: init failed: %s: %s\n", cfxGetErrorString(rc), cfxGetLastError(nullptr));
    return 1;
  }
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
