// Soak: randomly mixed collectives (any collective, datatype, op, PreMulSum included, counts from 0 to
// 64 Ki elements, in and out of place, any root), every result checked, on several communicators at once:
// the world and a split half on the main thread, and a copy (cfxCommShrink of nothing) driven by a
// second thread at the same time; on 4 ranks of one node and on 2 x 2 simulated nodes. Rank 0 samples its
// resident memory, descriptors, threads and /dev/shm segments as it goes (lines "soak ..." on stdout);
// at the end every rank's descriptors and threads are back and nothing is left in /dev/shm.
//
// CI runs a short slice. CONFLUX_SOAK_CASES=N sets the cases per rank (the main thread's; the second
// thread runs half as many), e.g. 100000 for the campaign in docs/reliability.md.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/process_resources.h"
#include "tests/multiproc/collective_cases.h"
#include "tests/multiproc/harness.h"

using namespace conflux::testing;

namespace {

long residentKiB() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int casesPerRank(int fallback) {
  const char* v = std::getenv("CONFLUX_SOAK_CASES");
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

void soak(int nodes, int cases) {
  const auto before = shmFiles();
  RunOptions opts;
  opts.timeoutSec = 240 + cases / 100;  // 100000 cases took 28 s on one node and 134 s on two here
  auto out = runRanks(4, [&](int rank, int n, const cfxUniqueId& id) -> int {
    if (nodes > 1) simulateNode(rank * nodes / n);
    const int fds = openDescriptors(), threads = liveThreads();
    cfxComm_t world = nullptr, half = nullptr, copy = nullptr;
    if (cfxCommInitRank(&world, n, id, rank) != cfxSuccess) return 2;
    if (cfxCommSplit(world, rank % 2, rank, &half, nullptr) != cfxSuccess) return 2;
    if (cfxCommShrink(world, nullptr, 0, &copy, nullptr) != cfxSuccess) return 2;
    constexpr uint64_t kMaxCount = 1 << 16;
    constexpr int kChunk = 250;
    int secondFailures = 0;
    std::thread second([&] { secondFailures = runRandomCases(copy, 7000, cases / 2, kMaxCount); });
    int failures = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int done = 0, chunk = 0; done < cases && failures == 0; done += kChunk, ++chunk) {
      // Every third chunk on the split half (the halves run theirs side by side), the rest on the world.
      cfxComm_t comm = chunk % 3 == 2 ? half : world;
      failures += runRandomCases(comm, 1000 + uint64_t(chunk), std::min(kChunk, cases - done), kMaxCount);
      if (rank == 0) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("soak nodes %d: cases %d s %.1f rss_kib %ld fds %d threads %d shm %d\n", nodes,
                    std::min(done + kChunk, cases), s, residentKiB(), openDescriptors(),
                    liveThreads(), directoryEntries("/dev/shm", "conflux-"));
        std::fflush(stdout);
      }
    }
    second.join();
    EXPECT_EQ(failures, 0) << "rank " << rank << ": cases on the world and the half";
    EXPECT_EQ(secondFailures, 0) << "rank " << rank << ": cases on the copy, from the second thread";
    EXPECT_EQ(cfxCommDestroy(copy), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(half), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(world), cfxSuccess);
    EXPECT_LE(liveThreadsSettled(threads), threads) << "rank " << rank << ": threads";
    // Rank 0 had the world's rendezvous store (made with the id, before the baseline), gone with the world.
    EXPECT_LE(openDescriptors(), fds) << "rank " << rank << ": descriptors";
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
  std::vector<std::string> left;
  for (int i = 0; i < 40; ++i) {
    left.clear();
    for (const auto& f : shmFiles()) {
      if (std::find(before.begin(), before.end(), f) == before.end()) left.push_back(f);
    }
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (const auto& f : left) ADD_FAILURE() << "left in /dev/shm: " << f;
}

TEST(Soak, FourRanksOneNode) { soak(1, casesPerRank(10000)); }

#if CONFLUX_TEST_OFI
TEST(Soak, TwoByTwoSimulatedNodes) { soak(2, casesPerRank(4000)); }
#endif

}  // namespace
