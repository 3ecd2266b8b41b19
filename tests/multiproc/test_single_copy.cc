// Single-copy reads of private send buffers (CONFLUX_SHM_CMA, src/direct_call.h): all-gather, broadcast
// and all-to-all against the reference with the reads on every eligible call, with some ranks' buffers
// from cfxMemAlloc, the warmth rule of `auto`, ranks whose settings differ, and a rank killed while its
// peers read its memory.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/multiproc/collective_cases.h"
#include "tests/multiproc/harness.h"

using namespace conflux::testing;
namespace fs = std::filesystem;

namespace {

/// Whether this machine lets a process read a sibling's memory with process_vm_readv, as ranks do (ptrace
/// permission: Yama's ptrace_scope 1 allows a parent but not a sibling; seccomp in containers). Where
/// it does not, Conflux stages and these tests have nothing to check.
bool crossMemoryPermitted() {
  static const bool permitted = [] {
    static volatile uint64_t word = 0x5eed;
    const pid_t owner = ::fork();
    if (owner == 0) {
      ::pause();
      ::_exit(0);
    }
    const pid_t reader = ::fork();
    if (reader == 0) {
      uint64_t value = 0;
      iovec local{&value, sizeof value}, remote{const_cast<uint64_t*>(&word), sizeof value};
      const bool ok = ::process_vm_readv(owner, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof value);
      ::_exit(ok && value == 0x5eed ? 0 : 1);
    }
    int status = 0;
    ::waitpid(reader, &status, 0);
    ::kill(owner, SIGKILL);
    ::waitpid(owner, nullptr, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }();
  return permitted;
}

#define SKIP_WITHOUT_CROSS_MEMORY()                                                               \
  if (!crossMemoryPermitted()) GTEST_SKIP() << "process_vm_readv is not permitted here (ptrace policy)"

/// The running test's name, fit for a file name (parameterised names hold a '/').
std::string testName() {
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  for (char& ch : name) ch = ch == '/' ? '_' : ch;
  return name;
}

/// A per-test folder for the ranks' logs (CONFLUX_DEBUG_FILE), removed at the end.
struct LogDir {
  fs::path path = fs::temp_directory_path() / ("cfx-cma-" + std::to_string(::getpid()) + "-" + testName());
  LogDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~LogDir() { fs::remove_all(path); }
  /// Environment that logs every call's algorithm (subsystem COLL) to one file per process.
  std::vector<std::pair<std::string, std::string>> env() const {
    return {{"CONFLUX_DEBUG", "INFO"}, {"CONFLUX_DEBUG_SUBSYS", "COLL"}, {"CONFLUX_DEBUG_FILE", (path / "rank.%p.log").string()}};
  }
  /// Lines of all the ranks' logs that contain `what`.
  int count(const std::string& what) const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(path)) {
      std::ifstream in(e.path());
      for (std::string line; std::getline(in, line);) n += line.find(what) != std::string::npos;
    }
    return n;
  }
};

Sweep copyingSweep(std::vector<uint64_t> counts) {
  Sweep s = fullSweep(std::move(counts));
  s.colls = {Coll::AllGather, Coll::Broadcast, Coll::AllToAll};
  s.ops = {cfxSum};  // nothing is reduced: one op is enough
  return s;
}

struct SweepCase {
  int nranks;
  Sweep::Memory memory;
};

void PrintTo(const SweepCase& c, std::ostream* os) {
  *os << c.nranks << " ranks, " << (c.memory == Sweep::Memory::Private ? "private" : "mixed");
}

class SingleCopySweep : public ::testing::TestWithParam<SweepCase> {};

}  // namespace

// CONFLUX_SHM_CMA=always and no smallest piece: every copying call with a private buffer reads it with
// process_vm_readv, every type, in and out of place, every root; with cfxMemAlloc buffers on even ranks
// the calls mix mapped and read peers.
TEST_P(SingleCopySweep, MatchesReference) {
  SKIP_WITHOUT_CROSS_MEMORY();
  const SweepCase c = GetParam();
  LogDir logs;
  Sweep sweep = copyingSweep({1, 7, 1023, 65539});
  sweep.memory = c.memory;
  RunOptions opts;
  opts.env = logs.env();
  opts.env.push_back({"CONFLUX_SHM_CMA", "always"});
  opts.env.push_back({"CONFLUX_SHM_CMA_MIN_BYTES", "0"});
  opts.env.push_back({"CONFLUX_EAGER_BYTES", "0"});  // the smallest counts too
  auto out = runRanks(c.nranks, [&](int r, int nr, const cfxUniqueId& id) { return sweepOnNewComm(r, nr, id, sweep); }, opts);
  EXPECT_TRUE(allSucceeded(out));
  // Every call of the sweep ran direct on every rank, reading peers (a broadcast from a cfxMemAlloc root
  // maps it instead): none was staged.
  const int read = logs.count(": direct_cma ("), staged = logs.count("count=") - logs.count(": direct");
  EXPECT_GT(read, 0);
  EXPECT_EQ(staged, 0) << read << " calls read peers, " << staged << " did not";
}

INSTANTIATE_TEST_SUITE_P(Layouts, SingleCopySweep,
                         ::testing::Values(SweepCase{2, Sweep::Memory::Private}, SweepCase{3, Sweep::Memory::Private},
                                           SweepCase{5, Sweep::Memory::Private},
                                           SweepCase{3, Sweep::Memory::SharedOnEvenRanks}),
                         [](const auto& p) {
                           return std::to_string(p.param.nranks) + "ranks_" +
                                  (p.param.memory == Sweep::Memory::Private ? "private" : "mixed");
                         });

namespace {

/// Four all-gathers of `count` floats per rank (64 Ki: 256 KiB pieces) on the same private buffers, each checked.
int gatherFourTimes(int rank, int nranks, const cfxUniqueId& id, size_t count = size_t{1} << 16) {
  cfxComm_t comm;
  if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
  std::vector<float> send(count, static_cast<float>(rank + 1)), recv(count * nranks, 0.0f);
  int wrong = 0;
  for (int i = 0; i < 4; ++i) {
    if (cfxAllGather(send.data(), recv.data(), count, cfxFloat32, comm, nullptr) != cfxSuccess) return 1;
    for (size_t k = 0; k < recv.size(); ++k) wrong += recv[k] != static_cast<float>(k / count + 1);
  }
  EXPECT_EQ(wrong, 0);
  return cfxCommDestroy(comm) == cfxSuccess && wrong == 0 ? 0 : 1;
}

}  // namespace

// auto: a call reads peers' buffers only on two ranks, and only when every rank's buffers are likely in
// cache. The first call touches them for the first time (staged); the next three find them recent
// (read). With a cache budget smaller than the buffers nothing is warm; on three ranks, with
// CONFLUX_SHM_CMA=0 or a larger smallest piece nothing is read either; with always every call is.
// Pieces under 512 KiB are read only when hot (touched within a quarter of the rank's cache share): with
// a 4 MiB cache (2 MiB a rank: the test's two processes are the only ranks on the machine) a call's
// 768 KiB are warm but not hot, so 256 KiB pieces stage while 512 KiB pieces (1.5 MiB a call, also
// warm) are read.
TEST(SingleCopy, AutoReadsOnlyWarmBuffersOfTwoRanks) {
  SKIP_WITHOUT_CROSS_MEMORY();
  struct Case {
    int nranks;
    std::vector<std::pair<std::string, std::string>> env;
    int readPerRank;
    size_t count = size_t{1} << 16;
  };
  const std::pair<std::string, std::string> smallCache = {"CONFLUX_CACHE_BYTES", "4194304"};
  // 256 KiB sent and 512 KiB received per call: warm in a 16 MiB cache whatever this machine's is.
  const std::pair<std::string, std::string> cache = {"CONFLUX_CACHE_BYTES", "16777216"};
  const std::vector<Case> cases = {{2, {cache, {"CONFLUX_SHM_CMA", "auto"}}, 3},
                                   {2, {{"CONFLUX_SHM_CMA", "auto"}, {"CONFLUX_CACHE_BYTES", "65536"}}, 0},
                                   {3, {cache, {"CONFLUX_SHM_CMA", "auto"}}, 0},
                                   {3, {{"CONFLUX_SHM_CMA", "always"}}, 4},
                                   {2, {{"CONFLUX_SHM_CMA", "0"}}, 0},
                                   {2, {{"CONFLUX_SHM_CMA", "auto"}, {"CONFLUX_SHM_CMA_MIN_BYTES", "262145"}}, 0},
                                   {2, {{"CONFLUX_SHM_CMA", "auto"}, smallCache}, 0},
                                   {2, {{"CONFLUX_SHM_CMA", "auto"}, smallCache}, 3, size_t{1} << 17}};
  for (const Case& c : cases) {
    LogDir logs;
    RunOptions opts;
    opts.env = logs.env();
    opts.env.insert(opts.env.end(), c.env.begin(), c.env.end());
    auto out = runRanks(c.nranks, [&](int r, int nr, const cfxUniqueId& id) { return gatherFourTimes(r, nr, id, c.count); },
                        opts);
    EXPECT_TRUE(allSucceeded(out));
    EXPECT_EQ(logs.count(": direct_cma ("), c.nranks * c.readPerRank)
        << c.nranks << " ranks, " << c.env.back().first << "=" << c.env.back().second << ", " << c.count << " floats";
  }
}

// Every rank decides from what all published, so ranks whose settings differ still run the same plan:
// one rank that never offers single-copy reads (a huge smallest piece), and one with them off (then the
// start-up probe turns them off for all). With the same settings on every rank, every call reads.
TEST(SingleCopy, RanksWhoseSettingsDifferAgree) {
  SKIP_WITHOUT_CROSS_MEMORY();
  for (const char* variable : {"", "CONFLUX_SHM_CMA_MIN_BYTES", "CONFLUX_SHM_CMA"}) {
    LogDir logs;
    RunOptions opts;
    opts.env = logs.env();
    opts.env.push_back({"CONFLUX_SHM_CMA", "always"});
    const std::string name = variable;
    auto out = runRanks(3, [&](int rank, int nranks, const cfxUniqueId& id) {
      if (rank == 1 && !name.empty()) ::setenv(variable, name == "CONFLUX_SHM_CMA" ? "0" : "1000000000", 1);
      return gatherFourTimes(rank, nranks, id);
    }, opts);
    EXPECT_TRUE(allSucceeded(out)) << variable;
    EXPECT_EQ(logs.count(": direct_cma ("), name.empty() ? 3 * 4 : 0) << (name.empty() ? "same settings" : variable);
  }
}

// Ranks whose calls differ (a count) fail with an error that says so, before anything is read: the
// call descriptors' check, or, with CONFLUX_CHECK_ARGS=0, the direct-call agreement's own.
TEST(SingleCopy, CallsThatDifferFailNamingTheDifference) {
  SKIP_WITHOUT_CROSS_MEMORY();
  for (const char* check : {"1", "0"}) {
    RunOptions opts;
    opts.env = {{"CONFLUX_SHM_CMA", "always"}, {"CONFLUX_CHECK_ARGS", check}};
    const std::string expected = std::string(check) == "1" ? "ranks disagree on call #1" : "the ranks' calls differ";
    auto out = runRanks(2, [&](int rank, int nranks, const cfxUniqueId& id) -> int {
      cfxComm_t comm;
      if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
      const size_t count = rank == 0 ? size_t{1} << 16 : size_t{1} << 15;
      std::vector<float> send(count, 1.0f), recv(count * nranks);
      EXPECT_EQ(cfxAllGather(send.data(), recv.data(), count, cfxFloat32, comm, nullptr), cfxInvalidUsage);
      const std::string message = cfxGetLastError(comm);
      std::fprintf(stderr, "rank %d: %s\n", rank, message.c_str());
      EXPECT_NE(message.find(expected), std::string::npos) << message;
      EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
      return 0;
    }, opts);
    EXPECT_TRUE(allSucceeded(out)) << "CONFLUX_CHECK_ARGS=" << check;
  }
}

// A rank killed while its peers read its memory: every survivor's call fails naming it, none hangs.
TEST(SingleCopy, KilledRankBecomesAnErrorOnEverySurvivor) {
  SKIP_WITHOUT_CROSS_MEMORY();
  RunOptions opts;
  opts.env = {{"CONFLUX_SHM_CMA", "always"}, {"CONFLUX_TIMEOUT_MS", "5000"}};
  opts.whileRunning = faultAfterInit(2, SIGKILL, 500);
  auto out = runRanks(3, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    markInitialized();
    const size_t count = size_t{1} << 20;  // 4 MiB read from each peer per call
    std::vector<float> send(count, 1.0f), recv(count * nranks);
    const auto start = std::chrono::steady_clock::now();
    cfxResult_t r = cfxSuccess;
    while (r == cfxSuccess && std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
      r = cfxAllGather(send.data(), recv.data(), count, cfxFloat32, comm, nullptr);
    }
    const std::string message = cfxGetLastError(comm);
    std::fprintf(stderr, "rank %d: %s: %s\n", rank, cfxGetErrorString(r), message.c_str());
    EXPECT_EQ(r, cfxRemoteError);
    EXPECT_NE(message.find("rank 2"), std::string::npos) << message;
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].exitCode, 0);
  EXPECT_EQ(out[1].exitCode, 0);
  EXPECT_EQ(out[2].signal, SIGKILL);
}
