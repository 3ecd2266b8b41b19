// conflux-fault-matrix: faults × call paths, each run checked on every surviving rank.
//
// A cell is one call path (the eager path, direct calls on cfxMemAlloc buffers, each plan algorithm, the
// hierarchical plan across two simulated nodes, send/recv groups, all-to-all, and three moments of bootstrap) under
// one fault of one rank (SIGKILL or a SIGSTOP that lasts, at a random moment of the run; a short SIGSTOP
// well below the timeout, which must NOT become an error). A run forks the ranks, injects the fault and
// checks, on every survivor:
//   - the call (or init) fails, naming the failed rank, within the timeout plus a stated margin;
//   - the survivors shrink the communicator (cfxCommShrink) and the new one gives the right sum;
//   - cfxCommAbort and cfxCommDestroy of the failed communicator return within a stated bound;
//   - nothing leaks: the process's file descriptors and threads are back where they were before init,
//     no segment of the run is left in /dev/shm, and in a sanitizer build LeakSanitizer finds no block
//     that the communicator left unreachable.
// A short stop must leave every rank's calls correct and error-free.
//
//   conflux-fault-matrix [--runs N] [--seed S] [--cells NAME,...] [--timeout-ms MS] [--list]
//
// Prints one row per cell (runs, correct, worst detection and abort+destroy times, leaks) and every
// failed run with its reason; exits 1 when a run failed. CI runs every cell once with a fixed seed.
#include <dirent.h>
#include <getopt.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/address_sanitizer.h"

#if CONFLUX_TEST_ASAN
#include <sanitizer/lsan_interface.h>

extern "C" __attribute__((visibility("default"))) const char* __lsan_default_suppressions() {
  return CONFLUX_TEST_LSAN_SUPPRESSIONS;
}
#endif

#include "conflux/conflux.h"
#include "core/cli_numbers.h"
#include "tests/common/process_resources.h"

namespace {

using conflux::testing::liveThreads;
using conflux::testing::liveThreadsSettled;
using conflux::testing::openDescriptors;

constexpr int kMaxRanks = 8;
constexpr double kDetectMarginMs = 1500;   // detection within the timeout plus this
constexpr double kAbortDestroyBoundMs = 2000;  // cfxCommAbort + cfxCommDestroy of a failed communicator
constexpr double kShortStopMs = 400;
// A libfabric endpoint whose operations to a dead or stopped peer never complete is parked, not closed
// (closing it crashed libfabric 1.17: transport/ofi/endpoint.cc): its fabric, domain, CQ and endpoint
// keep about ten descriptors until the process exits. Reported per cell, not counted as a leak.
constexpr int kParkedRailFds = 12;
constexpr const char* kMemoryLeaked = "LeakSanitizer found leaks (its report is on the rank's stderr)";

double nowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // one clock for every process of the run
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

/// What this process's descriptors are (stderr), to say what leaked.
void printDescriptors(int rank) {
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      char target[256] = {};
      const std::string link = std::string("/proc/self/fd/") + e->d_name;
      if (readlink(link.c_str(), target, sizeof target - 1) > 0) std::fprintf(stderr, "rank %d: fd %s -> %s\n", rank, e->d_name, target);
    }
    closedir(d);
  }
}

enum class Fault { Kill, Stop, ShortStop };
const char* faultName(Fault f) { return f == Fault::Kill ? "kill" : f == Fault::Stop ? "stop" : "short-stop"; }

struct Path {
  const char* name;
  const char* algo;  // CONFLUX_ALGO for the run ("" none)
  enum Kind { Eager, Direct, Plan, Hier, P2p, AllToAll, AllToAllNodes, InitRootDies, InitNeverArrives, DiesAfterInit } kind;
  size_t count;      // floats per call
};

const Path kPaths[] = {
    {"eager", "allreduce=eager", Path::Eager, 8},
    {"direct", "allreduce=direct", Path::Direct, 1 << 18},
    {"ring", "allreduce=ring", Path::Plan, 1 << 17},
    {"rhd", "allreduce=rhd", Path::Plan, 1 << 17},
    {"tree", "allreduce=tree", Path::Plan, 1 << 15},
    {"oneshot", "allreduce=oneshot", Path::Plan, 1 << 12},
    {"twoshot", "allreduce=twoshot", Path::Plan, 1 << 17},
    {"dbtree", "allreduce=dbtree", Path::Plan, 1 << 15},
    {"hier", "allreduce=hier", Path::Hier, 1 << 17},
    {"hier-rhd", "allreduce=hier_rhd", Path::Hier, 1 << 17},
    {"hier-dbtree", "allreduce=hier_dbtree", Path::Hier, 1 << 15},
    {"p2p", "", Path::P2p, 1 << 16},
    {"alltoall", "alltoall=pairwise", Path::AllToAll, 1 << 14},  // count per peer
    {"alltoall-nodes", "alltoall=pairwise", Path::AllToAllNodes, 1 << 14},
    {"init-root-dies", "", Path::InitRootDies, 8},
    {"init-never-arrives", "", Path::InitNeverArrives, 8},
    {"dies-after-init", "", Path::DiesAfterInit, 8},
};

bool isBootstrap(const Path& p) { return p.kind >= Path::InitRootDies; }
bool acrossNodes(const Path& p) { return p.kind == Path::Hier || p.kind == Path::AllToAllNodes; }
bool isAllToAll(const Path& p) { return p.kind == Path::AllToAll || p.kind == Path::AllToAllNodes; }

/// What one rank reports through memory shared with the parent.
struct RankRecord {
  std::atomic<int> phase;  // 0 started, 1 communicator ready, 2 calling, 3 finished
  int result;              // the first failing call's result (0: none failed)
  double failedAtMs;       // when it failed (nowMs)
  double abortDestroyMs;
  int shrinkOk;            // 1: the shrunk communicator's sum was right; 0: it was not; -1: not tried
  int fdsLeaked, threadsLeaked;
  int memoryLeaked;        // 1: LeakSanitizer found unreachable blocks after the destroy (sanitizer builds)
  int calls;
  char message[640];
};

struct Shared {
  cfxUniqueId id;
  std::atomic<int> idReady;
  std::atomic<int> go;  // the parent lets the ranks start calling
  double faultAtMs;     // when the parent injected the fault
  RankRecord ranks[kMaxRanks];
};

struct Run {
  const Path* path;
  Fault fault;
  int nranks, victim, timeoutMs;
  double faultDelayMs;
};

void note(RankRecord& rec, cfxResult_t r, const char* msg) {
  if (rec.result != 0) return;
  rec.result = r;
  rec.failedAtMs = nowMs();
  std::snprintf(rec.message, sizeof rec.message, "%s", msg);
}

/// The run's calls until one fails, or until `untilMs` (nowMs) passes. True when none failed. With
/// `vote`, the ranks agree after each call whether any has reached its end (a one-int all-reduce), so
/// all make the same number of calls and stop together.
bool callUntil(const Run& run, int rank, cfxComm_t comm, float* buf, float* out, RankRecord& rec, double untilMs,
               bool vote) {
  const int n = run.nranks;
  for (;;) {
    cfxResult_t r;
    if (run.path->kind == Path::P2p) {
      cfxGroupStart();
      cfxSend(buf, run.path->count, cfxFloat32, (rank + 1) % n, comm, nullptr);
      cfxRecv(out, run.path->count, cfxFloat32, (rank + n - 1) % n, comm, nullptr);
      r = cfxGroupEnd();
      if (r == cfxSuccess && out[0] != float((rank + n - 1) % n)) {
        note(rec, cfxInternalError, "wrong data received");
        return false;
      }
    } else if (isAllToAll(*run.path)) {
      // Block j carries (call, rank, j): block i of what arrives must be (call, i, rank), at both ends
      // (the call's number in it, so that a block left from an earlier call does not pass).
      const size_t c = run.path->count;
      const int call = (rec.calls % 1024) * kMaxRanks * kMaxRanks;
      for (int j = 0; j < n; ++j) buf[size_t(j) * c] = buf[size_t(j + 1) * c - 1] = float(call + rank * kMaxRanks + j);
      r = cfxAllToAll(buf, out, c, cfxFloat32, comm, nullptr);
      for (int i = 0; r == cfxSuccess && i < n; ++i) {
        const float want = float(call + i * kMaxRanks + rank);
        if (out[size_t(i) * c] != want || out[size_t(i + 1) * c - 1] != want) {
          note(rec, cfxInternalError, "wrong block received");
          return false;
        }
      }
    } else {
      for (size_t i = 0; i < run.path->count; i += 997) buf[i] = 1.0f;
      buf[run.path->count - 1] = 1.0f;
      r = cfxAllReduce(buf, buf, run.path->count, cfxFloat32, cfxSum, comm, nullptr);
      if (r == cfxSuccess && (buf[0] != float(n) || buf[run.path->count - 1] != float(n))) {
        note(rec, cfxInternalError, "wrong sum");
        return false;
      }
    }
    if (r != cfxSuccess) {
      note(rec, r, cfxGetLastError(comm));
      return false;
    }
    ++rec.calls;
    int32_t done = nowMs() >= untilMs ? 1 : 0;
    if (vote && (r = cfxAllReduce(&done, &done, 1, cfxInt32, cfxMax, comm, nullptr)) != cfxSuccess) {
      note(rec, r, cfxGetLastError(comm));
      return false;
    }
    if (done) return true;
  }
}

/// The survivors' communicator without the victim gives the right sum.
int shrinkWorks(cfxComm_t comm, int rank, const Run& run) {
  cfxComm_t rest = nullptr;  // the default settings: survivors that learnt of the failure late still meet
  if (cfxCommShrink(comm, &run.victim, 1, &rest, nullptr) != cfxSuccess) {
    std::fprintf(stderr, "rank %d: shrink failed: %s\n", rank, cfxGetLastError(comm));
    return 0;
  }
  int want = 0;
  for (int r = 0; r < run.nranks; ++r) want += r == run.victim ? 0 : r;
  int v = rank;
  const bool ok = cfxAllReduce(&v, &v, 1, cfxInt32, cfxSum, rest, nullptr) == cfxSuccess && v == want;
  cfxCommDestroy(rest);
  return ok ? 1 : 0;
}

int rankMain(const Run& run, int rank, Shared& sh) {
  RankRecord& rec = sh.ranks[rank];
  const int fdsBefore = openDescriptors(), threadsBefore = liveThreads();
  if (acrossNodes(*run.path)) {  // ranks 0..n/2-1 on one simulated node, the rest on another
    setenv("CONFLUX_HOSTID", rank < run.nranks / 2 ? "fault-node0" : "fault-node1", 1);
    setenv("CONFLUX_OFI_ADDR", "127.0.0.1", 1);
    setenv("CONFLUX_TCP_ADDR", "127.0.0.1", 1);
  }
  if (rank == 0) {
    if (cfxGetUniqueId(&sh.id) != cfxSuccess) return 2;
    sh.idReady.store(1);
  }
  const double deadline = nowMs() + 20000;
  while (sh.idReady.load() == 0 && nowMs() < deadline) usleep(1000);
  if (run.path->kind == Path::InitNeverArrives && rank == run.victim) {
    pause();  // never joins; the parent kills it
  }
  if (run.path->kind == Path::InitRootDies && rank != 0) usleep(300000);  // the parent kills rank 0 meanwhile
  cfxComm_t comm = nullptr;
  auto leaks = [&] {
    // Threads may take a moment to be reaped after their join.
    rec.threadsLeaked = liveThreadsSettled(threadsBefore, 500) - threadsBefore;
    rec.fdsLeaked = openDescriptors() - fdsBefore;
    if (rec.fdsLeaked > 0) printDescriptors(rank);
#if CONFLUX_TEST_ASAN
    // The rank ends with _exit, which skips LeakSanitizer's check at exit: run it now, after the destroy.
    rec.memoryLeaked = __lsan_do_recoverable_leak_check() != 0 ? 1 : 0;
#endif
    rec.phase.store(3);
  };
  cfxResult_t r = cfxCommInitRank(&comm, run.nranks, sh.id, rank);
  if (r != cfxSuccess) {
    note(rec, r, cfxGetLastError(nullptr));
    leaks();
    return 0;
  }
  rec.phase.store(1);
  while (sh.go.load() == 0 && nowMs() < deadline) usleep(500);
  rec.phase.store(2);
  std::vector<float> privateBuf, privateOut;
  float* buf = nullptr;
  float* out = nullptr;
  void* mem = nullptr;
  const size_t bytes = run.path->count * sizeof(float);
  if (run.path->kind == Path::Direct) {
    if (cfxMemAlloc(&mem, bytes) != cfxSuccess) return 2;
    buf = static_cast<float*>(mem);
  } else {
    const size_t elements = run.path->count * (isAllToAll(*run.path) ? size_t(run.nranks) : 1);
    privateBuf.assign(elements, float(rank));
    privateOut.assign(elements, -1.0f);
    buf = privateBuf.data();
    out = privateOut.data();
  }
  // Calls until the fault's effect (or, for a short stop, for a fixed window that covers it).
  const bool shortStop = run.fault == Fault::ShortStop;
  const double window = shortStop ? run.faultDelayMs + kShortStopMs + 1000 : 30000;
  const bool clean = callUntil(run, rank, comm, buf, out, rec, nowMs() + window, shortStop);
  if (!clean && !shortStop) {
    rec.shrinkOk = shrinkWorks(comm, rank, run);
  }
  const double t0 = nowMs();
  if (!clean) cfxCommAbort(comm);
  cfxCommDestroy(comm);
  rec.abortDestroyMs = nowMs() - t0;
  if (mem != nullptr) cfxMemFree(mem);
  leaks();
  return 0;
}

std::set<std::string> shmSegments() {
  std::set<std::string> out;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::strncmp(e->d_name, "conflux-", 8) == 0) out.insert(e->d_name);
    }
    closedir(d);
  }
  return out;
}

bool names(const char* message, int rank) {
  const std::string r = std::to_string(rank);
  return std::strstr(message, ("rank " + r + " ").c_str()) != nullptr || std::strstr(message, ("rank " + r + ")").c_str()) != nullptr ||
         std::strstr(message, ("rank " + r + ":").c_str()) != nullptr || std::strstr(message, ("rank(s) " + r).c_str()) != nullptr;
}
int nodeOf(int rank, int nranks) { return rank < nranks / 2 ? 0 : 1; }  // the hier path's two simulated nodes
int mateOf(int rank, int nranks) { return nodeOf(rank, nranks) == 0 ? (rank + 1) % (nranks / 2) : nranks / 2 + (rank + 1 - nranks / 2) % (nranks / 2); }

/// One run: forks the ranks, injects the fault, and returns "" when every expectation held.
std::string runOnce(const Run& run, double* worstDetect, double* worstAbort, int* parked, int* namedMate) {
  auto* sh = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (sh == MAP_FAILED) return "mmap failed";
  new (sh) Shared();
  for (auto& r : sh->ranks) r.shrinkOk = -1;
  const std::set<std::string> shmBefore = shmSegments();
  std::vector<pid_t> pids;
  std::fflush(stdout);
  std::fflush(stderr);
  for (int r = 0; r < run.nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) _exit(rankMain(run, r, *sh));
    pids.push_back(pid);
  }
  const double start = nowMs();
  auto allPhase = [&](int phase, bool skipVictim) {
    for (int r = 0; r < run.nranks; ++r) {
      if (skipVictim && r == run.victim) continue;
      if (sh->ranks[r].phase.load() < phase) return false;
    }
    return true;
  };
  const pid_t victim = pids[size_t(run.victim)];
  std::string why;
  if (isBootstrap(*run.path)) {
    if (run.path->kind == Path::DiesAfterInit) {
      while (!allPhase(1, false) && nowMs() - start < 20000) usleep(1000);
    } else if (run.path->kind == Path::InitRootDies) {
      while (sh->idReady.load() == 0 && nowMs() - start < 20000) usleep(1000);
      usleep(100000);
    }
    sh->faultAtMs = run.path->kind == Path::InitNeverArrives ? start : nowMs();
    if (run.path->kind != Path::InitNeverArrives) kill(victim, SIGKILL);  // that one stays away, alive
    sh->go.store(1);
  } else {
    while (!allPhase(1, false) && nowMs() - start < 20000) usleep(1000);
    sh->go.store(1);
    usleep(useconds_t(run.faultDelayMs * 1000));
    sh->faultAtMs = nowMs();
    kill(victim, run.fault == Fault::Kill ? SIGKILL : SIGSTOP);
    if (run.fault == Fault::ShortStop) {
      usleep(useconds_t(kShortStopMs * 1000));
      kill(victim, SIGCONT);
    }
  }
  // The survivors finish (or, for a short stop, everyone); a lasting stop is ended then.
  const double limit = run.timeoutMs * 3.0 + 20000;
  while (!allPhase(3, run.fault != Fault::ShortStop) && nowMs() - start < limit) usleep(2000);
  if (run.fault == Fault::Stop || run.path->kind == Path::InitNeverArrives) kill(victim, SIGKILL);
  for (pid_t p : pids) {
    int status = 0;
    const double waitUntil = nowMs() + 5000;
    while (waitpid(p, &status, WNOHANG) == 0) {
      if (nowMs() > waitUntil) {
        kill(p, SIGKILL);
        waitpid(p, &status, 0);
        if (why.empty()) why = "a rank did not exit";
        break;
      }
      usleep(2000);
    }
  }
  // Expectations, rank by rank.
  const std::string victimName = "rank " + std::to_string(run.victim);
  for (int r = 0; r < run.nranks && why.empty(); ++r) {
    const RankRecord& rec = sh->ranks[r];
    const std::string who = "rank " + std::to_string(r) + ": ";
    if (run.fault == Fault::ShortStop) {
      if (rec.phase.load() != 3) why = who + "did not finish";
      else if (rec.result != 0) why = who + "a short stop became an error: " + rec.message;
      else if (rec.fdsLeaked != 0 || rec.threadsLeaked != 0) why = who + "leaked descriptors or threads";
      else if (rec.memoryLeaked != 0) why = who + kMemoryLeaked;
      continue;
    }
    if (r == run.victim) continue;
    const double detect = rec.failedAtMs - sh->faultAtMs;
    if (rec.phase.load() != 3) why = who + "did not finish";
    else if (rec.result == 0) why = who + "no error";
    else if (!names(rec.message, run.victim) &&
             !(run.path->kind == Path::InitRootDies && std::strstr(rec.message, "store") != nullptr)) {
      // Across nodes a survivor may time out at the same moment as the victim's node-mates and name the
      // one it waited for there (their report naming the victim did not reach it in time): counted apart.
      const int mate = acrossNodes(*run.path) && nodeOf(r, run.nranks) != nodeOf(run.victim, run.nranks)
                           ? mateOf(run.victim, run.nranks) : -1;
      if (mate >= 0 && names(rec.message, mate)) ++*namedMate;
      else why = who + "the error does not name " + victimName + ": " + rec.message;
    }
    else if (detect > run.timeoutMs + kDetectMarginMs) why = who + "detected after " + std::to_string(int(detect)) + " ms";
    else if ((!isBootstrap(*run.path) || run.path->kind == Path::DiesAfterInit) && rec.shrinkOk != 1)
      why = who + "the shrunk communicator did not work";
    else if (rec.abortDestroyMs > kAbortDestroyBoundMs) why = who + "abort + destroy took " + std::to_string(int(rec.abortDestroyMs)) + " ms";
    else if (rec.fdsLeaked != 0 && !(acrossNodes(*run.path) && rec.fdsLeaked <= kParkedRailFds))
      why = who + std::to_string(rec.fdsLeaked) + " descriptors leaked";
    else if (rec.threadsLeaked != 0) why = who + std::to_string(rec.threadsLeaked) + " threads leaked";
    else if (rec.memoryLeaked != 0) why = who + kMemoryLeaked;
    if (why.empty() && rec.fdsLeaked > 0) ++*parked;
    if (why.empty()) {
      *worstDetect = std::max(*worstDetect, detect);
      *worstAbort = std::max(*worstAbort, rec.abortDestroyMs);
    }
  }
  if (why.empty()) {
    std::set<std::string> left;
    for (int i = 0; i < 40; ++i) {  // segments of parallel tests come and go: a leak stays
      left.clear();
      for (const auto& s : shmSegments()) {
        if (!shmBefore.count(s)) left.insert(s);
      }
      if (left.empty()) break;
      usleep(50000);
    }
    if (!left.empty()) why = "left in /dev/shm: " + *left.begin();
  }
  sh->~Shared();
  munmap(sh, sizeof(Shared));
  return why;
}

struct Row {
  std::string cell;
  int runs = 0, correct = 0;
  double worstDetect = 0, worstAbort = 0;
  int parked = 0;     // survivors whose failed libfabric endpoint stayed open (kParkedRailFds)
  int namedMate = 0;  // survivors on another node that named the victim's node-mate instead
  std::vector<std::string> failures;
};

void usage() {
  std::fprintf(stderr,
               "usage: conflux-fault-matrix [--runs N] [--seed S] [--cells NAME,...] [--timeout-ms MS] [--list]\n");
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 1, timeoutMs = 2000;
  long long seed = 1;
  std::string cellsArg;
  bool list = false;
  const option longOpts[] = {{"runs", required_argument, nullptr, 'r'},       {"seed", required_argument, nullptr, 's'},
                             {"cells", required_argument, nullptr, 'c'},      {"timeout-ms", required_argument, nullptr, 't'},
                             {"list", no_argument, nullptr, 'l'},             {nullptr, 0, nullptr, 0}};
  for (int c; (c = getopt_long(argc, argv, "", longOpts, nullptr)) != -1;) {
    const std::string v = optarg ? optarg : "";
    bool ok = true;
    if (c == 'r') ok = conflux::cli::parseInt(v, 1, 100000, &runs);
    else if (c == 's') ok = conflux::cli::parseInt(v, 0, (1LL << 62), &seed);
    else if (c == 'c') cellsArg = v;
    else if (c == 't') ok = conflux::cli::parseInt(v, 200, 600000, &timeoutMs);
    else if (c == 'l') list = true;
    else ok = false;
    if (!ok) {
      std::fprintf(stderr, "conflux-fault-matrix: bad option or value '%s'\n", v.c_str());
      usage();
      return 2;
    }
  }
  std::vector<std::pair<const Path*, Fault>> cells;
  for (const Path& p : kPaths) {
    if (isBootstrap(p)) {
      cells.push_back({&p, Fault::Kill});
    } else {
      for (Fault f : {Fault::Kill, Fault::Stop, Fault::ShortStop}) cells.push_back({&p, f});
    }
  }
  auto cellName = [](const std::pair<const Path*, Fault>& c) { return std::string(c.first->name) + "/" + faultName(c.second); };
  if (list) {
    for (const auto& c : cells) std::printf("%s\n", cellName(c).c_str());
    return 0;
  }
  if (!cellsArg.empty()) {
    std::vector<std::pair<const Path*, Fault>> chosen;
    for (const auto& c : cells) {
      const std::string name = cellName(c);
      size_t pos = 0;
      while (pos <= cellsArg.size()) {
        const size_t comma = cellsArg.find(',', pos);
        const std::string want = cellsArg.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (!want.empty() && (name == want || name.rfind(want + "/", 0) == 0)) {
          chosen.push_back(c);
          break;
        }
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    }
    if (chosen.empty()) {
      std::fprintf(stderr, "conflux-fault-matrix: --cells '%s' names no cell (see --list)\n", cellsArg.c_str());
      return 2;
    }
    cells = chosen;
  }
  unsigned int features = 0;
  cfxGetFeatures(&features);
  setenv("CONFLUX_TIMEOUT_MS", std::to_string(timeoutMs).c_str(), 1);
  setenv("CONFLUX_COST_PROBE", "0", 1);
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<Row> rows;
  int passed = 0, failed = 0, skipped = 0;
  const double t0 = nowMs();
  for (const auto& c : cells) {
    Row row;
    row.cell = cellName(c);
    if (acrossNodes(*c.first) && !(features & CFX_FEATURE_OFI)) {
      ++skipped;
      continue;
    }
    for (int i = 0; i < runs; ++i) {
      Run run;
      run.path = c.first;
      run.fault = c.second;
      run.nranks = 4;
      run.timeoutMs = timeoutMs;
      run.faultDelayMs = std::uniform_real_distribution<double>(50, 800)(rng);
      // The victim: the root for its cell, rank 0 sometimes (it leads nothing special after init).
      run.victim = c.first->kind == Path::InitRootDies ? 0 : int(std::uniform_int_distribution<int>(0, run.nranks - 1)(rng));
      setenv("CONFLUX_ALGO", c.first->algo, 1);
      if (*c.first->algo == '\0') unsetenv("CONFLUX_ALGO");
      const std::string why = runOnce(run, &row.worstDetect, &row.worstAbort, &row.parked, &row.namedMate);
      ++row.runs;
      if (why.empty()) {
        ++row.correct;
        ++passed;
      } else {
        ++failed;
        row.failures.push_back("run " + std::to_string(i) + " (victim " + std::to_string(run.victim) + ", fault after " +
                               std::to_string(int(run.faultDelayMs)) + " ms): " + why);
      }
    }
    std::string extra;
    if (row.parked) extra += "  endpoints parked: " + std::to_string(row.parked);
    if (row.namedMate) extra += "  named the victim's node-mate: " + std::to_string(row.namedMate);
    std::printf("%-28s runs %4d  correct %4d  worst detection %6.0f ms  worst abort+destroy %5.0f ms%s\n",
                row.cell.c_str(), row.runs, row.correct, row.worstDetect, row.worstAbort, extra.c_str());
    for (const auto& f : row.failures) std::printf("    FAILED %s\n", f.c_str());
    std::fflush(stdout);
    rows.push_back(std::move(row));
  }
  std::printf("timeout %d ms; detection bound timeout + %.0f ms; abort+destroy bound %.0f ms; %.0f s in all\n", timeoutMs,
              kDetectMarginMs, kAbortDestroyBoundMs, (nowMs() - t0) / 1e3);
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed == 0 ? 0 : 1;
}
