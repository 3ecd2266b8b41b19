// Every collective on CUDA device buffers, with 2-4 processes sharing the GPU(s) (rank r uses device
// r % count): every datatype and op, in and out of place, odd counts, against the host reference. The
// all-reduce takes the CUDA-IPC kernels (one-shot and two-shot, in several pieces when the slots are
// small), or host staging when CONFLUX_CUDA_IPC=0; the other collectives stage through host memory.
// A rank that never arrives makes the IPC kernel time out: an error within the timeout, not a hang.
// Skips with "skipped: no CUDA device" where there is none.
#include <gtest/gtest.h>
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "tests/multiproc/collective_cases.h"
#include "tests/multiproc/harness.h"

using namespace conflux::testing;

namespace {

// CUDA must not be initialised in the parent, which forks the ranks: ask in a child.
int deviceCountInChild() {
  const pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    _exit(cudaGetDeviceCount(&n) == cudaSuccess ? (n > 100 ? 100 : n) : 0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 0;
  return WEXITSTATUS(status);
}

#define REQUIRE_CUDA_DEVICE()                                  \
  do {                                                         \
    static const int devices = deviceCountInChild();           \
    if (devices == 0) GTEST_SKIP() << "skipped: no CUDA device"; \
  } while (0)

Sweep deviceSweep(std::vector<uint64_t> counts) {
  Sweep s = fullSweep(std::move(counts));
  s.memory = Sweep::Memory::Device;
  return s;
}

class DeviceCollectives : public ::testing::TestWithParam<int> {};

// Every collective, type and op; all-reduce through CUDA IPC (one-shot up to 256 KiB, two-shot above).
TEST_P(DeviceCollectives, EveryTypeOpAndLayout) {
  REQUIRE_CUDA_DEVICE();
  Sweep sweep = deviceSweep({0, 1, 7, 1023, 70001, (1u << 20) + 3});
  auto out = runRanks(GetParam(), [&](int r, int nr, const cfxUniqueId& id) { return sweepOnNewComm(r, nr, id, sweep); });
  EXPECT_TRUE(allSucceeded(out));
}

// Small IPC slots: large all-reduces run in many pieces, both slot halves reused many times.
TEST_P(DeviceCollectives, AllReduceInPiecesThroughSmallSlots) {
  REQUIRE_CUDA_DEVICE();
  Sweep sweep = deviceSweep({65535, 300007, (1u << 20) + 3});
  sweep.colls = {Coll::AllReduce};
  sweep.types = {cfxInt8, cfxFloat16, cfxBfloat16, cfxFloat32, cfxFloat64, cfxUint64};
  RunOptions opts;
  opts.env = {{"CONFLUX_CUDA_IPC_BYTES", "65536"}, {"CONFLUX_CUDA_ONESHOT_BYTES", "16384"}};
  auto out = runRanks(GetParam(), [&](int r, int nr, const cfxUniqueId& id) { return sweepOnNewComm(r, nr, id, sweep); }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

// CUDA IPC off: the all-reduce stages through host memory like the other collectives.
TEST_P(DeviceCollectives, AllReduceThroughHostStaging) {
  REQUIRE_CUDA_DEVICE();
  Sweep sweep = deviceSweep({1, 1023, 300007});
  sweep.colls = {Coll::AllReduce};
  RunOptions opts;
  opts.env = {{"CONFLUX_CUDA_IPC", "0"}};
  auto out = runRanks(GetParam(), [&](int r, int nr, const cfxUniqueId& id) { return sweepOnNewComm(r, nr, id, sweep); }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceCollectives, ::testing::Values(2, 3, 4),
                         [](const auto& p) { return std::to_string(p.param) + "ranks"; });

#if CONFLUX_TEST_OFI
// Two simulated nodes of two ranks on loopback (libfabric tcp between them): device buffers stage
// through pinned host memory in pieces (small pieces here, so that a call has many), and the
// hierarchical all-reduce runs on them; every collective, with the selector's choices and hier forced.
class DeviceAcrossNodes : public ::testing::TestWithParam<const char*> {};

TEST_P(DeviceAcrossNodes, EveryCollectiveStagedInPieces) {
  REQUIRE_CUDA_DEVICE();
  Sweep sweep = deviceSweep({1, 1023, 300007, (1u << 21) + 3});
  sweep.types = {cfxInt8, cfxFloat16, cfxFloat32, cfxFloat64};
  RunOptions opts;
  opts.env = {{"CONFLUX_ALGO", GetParam()}, {"CONFLUX_CUDA_STAGING_PIECE_BYTES", "262144"}};
  auto out = runRanks(4, [&](int r, int nr, const cfxUniqueId& id) {
    simulateNode(r / 2);
    return sweepOnNewComm(r, nr, id, sweep);
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

INSTANTIATE_TEST_SUITE_P(Algos, DeviceAcrossNodes, ::testing::Values("", "allreduce=hier"),
                         [](const auto& p) { return std::string(*p.param ? "hier" : "auto"); });
#endif

// Rank 1 never calls the all-reduce: rank 0's kernel gives up after CONFLUX_TIMEOUT_MS, the stream
// completes, and the communicator reports the timeout naming rank 1.
TEST(DeviceFailures, MissingPeerTimesOutInsteadOfHanging) {
  REQUIRE_CUDA_DEVICE();
  RunOptions opts;
  opts.timeoutSec = 60;
  opts.env = {{"CONFLUX_TIMEOUT_MS", "2000"}, {"CONFLUX_DEBUG", "NONE"}};
  auto out = runRanks(2, [&](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm = nullptr;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    int devices = 0;
    cudaGetDeviceCount(&devices);
    cudaSetDevice(rank % devices);
    float* buf = nullptr;
    if (cudaMalloc(reinterpret_cast<void**>(&buf), 1024 * sizeof(float)) != cudaSuccess) return 3;
    cudaStream_t stream = nullptr;
    cudaStreamCreate(&stream);
    // Both ranks run one all-reduce (which sets up the IPC workspaces); then only rank 0 runs another.
    if (cfxAllReduce(buf, buf, 1024, cfxFloat32, cfxSum, comm, stream) != cfxSuccess) return 4;
    if (cudaStreamSynchronize(stream) != cudaSuccess) return 5;
    int code = 0;
    if (rank == 0) {
      const auto start = std::chrono::steady_clock::now();
      if (cfxAllReduce(buf, buf, 1024, cfxFloat32, cfxSum, comm, stream) != cfxSuccess) return 6;
      if (cudaStreamSynchronize(stream) != cudaSuccess) return 7;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      cfxResult_t async = cfxSuccess;
      cfxCommGetAsyncError(comm, &async);
      const std::string why = cfxGetLastError(comm);
      fprintf(stderr, "rank 0: stream done after %.2f s, async error %d: %s\n", s, static_cast<int>(async), why.c_str());
      if (async != cfxTimeout || why.find("rank 1") == std::string::npos || s > 10) code = 8;
      // The communicator is out of service now: the next call fails at once.
      if (cfxAllReduce(buf, buf, 1024, cfxFloat32, cfxSum, comm, stream) == cfxSuccess) code = 9;
    } else {
      sleep(4);  // long past rank 0's timeout, then leave without the second call
    }
    cudaFree(buf);
    cudaStreamDestroy(stream);
    cfxCommDestroy(comm);
    return code;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

}  // namespace
