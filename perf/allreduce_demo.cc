// conflux-allreduce-demo: forks N local ranks, runs float32 sum all-reduce over a range of sizes and
// prints, per size, the time, algorithm and bus bandwidth (nccl-tests' definitions) and a correctness
// check. The full nccl-tests compatible suite is conflux-perf; this is the quick "does it work, how fast".
//
//   conflux-allreduce-demo [--ranks N] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [--pin]
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "conflux/conflux.h"

namespace {

struct Options {
  int ranks = 2;
  size_t minBytes = 8;
  size_t maxBytes = 64u << 20;
  int factor = 4;
  int iters = 0;  // 0: choose per size
  int warmup = 5;
  bool pin = false;
};

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "missing value after %s\n", a.c_str());
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--ranks" || a == "-N") o.ranks = std::atoi(next());
    else if (a == "-b") o.minBytes = parseSize(next());
    else if (a == "-e") o.maxBytes = parseSize(next());
    else if (a == "-f") o.factor = std::atoi(next());
    else if (a == "-n") o.iters = std::atoi(next());
    else if (a == "-w") o.warmup = std::atoi(next());
    else if (a == "--pin") o.pin = true;
    else {
      fprintf(stderr, "usage: %s [--ranks N] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [--pin]\n", argv[0]);
      exit(2);
    }
  }
  if (o.ranks < 1 || o.factor < 2 || o.minBytes < 4 || o.maxBytes < o.minBytes) {
    fprintf(stderr, "bad options\n");
    exit(2);
  }
  return o;
}

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cfxResult_t r_ = (call);                                                                     \
    if (r_ != cfxSuccess) {                                                                      \
      fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, #call, cfxGetErrorString(r_),        \
              cfxGetLastError(nullptr));                                                         \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

int runRank(int rank, const Options& o, const cfxUniqueId& id) {
  if (o.pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(rank % static_cast<int>(std::thread::hardware_concurrency()), &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  cfxComm_t comm;
  CHECK(cfxCommInitRank(&comm, o.ranks, id, rank));
  const int n = o.ranks;
  std::vector<float> send(o.maxBytes / 4), recv(o.maxBytes / 4);
  if (rank == 0) {
    printf("# conflux-allreduce-demo: %d ranks, float32 sum, out of place%s\n", n, o.pin ? ", pinned" : "");
    printf("#\n# %12s %12s %10s %10s %10s %8s\n", "size(B)", "count", "time(us)", "algbw", "busbw", "#wrong");
  }
  int totalWrong = 0;
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes; bytes *= static_cast<size_t>(o.factor)) {
    const size_t count = bytes / 4;
    for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
    int iters = o.iters > 0 ? o.iters : static_cast<int>(std::clamp<size_t>((256u << 20) / std::max<size_t>(bytes, 1), 5, 2000));
    for (int w = 0; w < o.warmup; ++w) CHECK(cfxAllReduce(send.data(), recv.data(), count, cfxFloat32, cfxSum, comm, nullptr));
    CHECK(cfxAllReduce(send.data(), recv.data(), 1, cfxFloat32, cfxSum, comm, nullptr));  // line up the ranks
    auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iters; ++it) CHECK(cfxAllReduce(send.data(), recv.data(), count, cfxFloat32, cfxSum, comm, nullptr));
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    // Check the result of the last call, then agree on the slowest rank's time and the total errors.
    int wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      float want = static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7));
      if (recv[i] != want) ++wrong;
    }
    double stats[2] = {us, static_cast<double>(wrong)};
    double maxStats[2];
    CHECK(cfxAllReduce(stats, maxStats, 2, cfxFloat64, cfxMax, comm, nullptr));
    totalWrong += static_cast<int>(maxStats[1]);
    if (rank == 0) {
      double algbw = static_cast<double>(bytes) / maxStats[0] / 1e3;
      double busbw = algbw * 2.0 * (n - 1) / n;
      printf("  %12zu %12zu %10.2f %10.2f %10.2f %8d\n", bytes, count, maxStats[0], algbw, busbw,
             static_cast<int>(maxStats[1]));
      fflush(stdout);
    }
  }
  CHECK(cfxCommDestroy(comm));
  if (rank == 0) printf("# %s: %d wrong element(s)\n", totalWrong == 0 ? "correct" : "WRONG", totalWrong);
  return totalWrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  struct Shared {
    std::atomic<int> ready;
    cfxUniqueId id;
  };
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) return 1;
  new (shared) Shared();
  fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < o.ranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int rank = r;
      if (rank == 0) {
        CHECK(cfxGetUniqueId(&shared->id));
        shared->ready.store(1);
      } else {
        while (shared->ready.load() == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      cfxUniqueId id = shared->id;
      _exit(runRank(r, o, id));
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  return failed == 0 ? 0 : 1;
}
