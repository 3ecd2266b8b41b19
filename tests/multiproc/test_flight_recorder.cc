// The flight recorder on real ranks: a stopped rank, a killed rank and ranks that disagree on a call's
// arguments leave dumps in CONFLUX_TRACE_DIR from which conflux-trace (the built tool, and its analysis
// library for the details) names the rank at fault; SIGUSR1 (CONFLUX_TRACE_SIGNAL) dumps a healthy job
// without disturbing it; a job without errors writes nothing. The cut link is tests/netns/test_faults.py.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/multiproc/harness.h"
#include "tools/trace/trace_analysis.h"

using namespace conflux::testing;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

class TraceDir {
 public:
  TraceDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() / ("cfx-recorder-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TraceDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }
  /// Dumps (not temporary files) now in the directory.
  size_t dumps() const {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(path_)) n += e.path().extension() == ".json" && e.path().filename().string()[0] != '.';
    return n;
  }
  /// Waits up to `seconds` for `n` dumps.
  bool waitForDumps(size_t n, double seconds) const {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      if (dumps() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return dumps() >= n;
  }

 private:
  fs::path path_;
};

/// What `conflux-trace DIR` prints (stdout and stderr), and its exit status.
std::pair<int, std::string> runConfluxTrace(const std::string& dir) {
  const std::string cmd = std::string(CONFLUX_TRACE_BIN) + " " + dir + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  std::array<char, 512> buf{};
  while (fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

/// All-reduces `count` floats in place until a call fails or `limitMs` passes; returns the failing result.
cfxResult_t allReduceUntilError(cfxComm_t comm, size_t count, double limitMs) {
  std::vector<float> buf(count, 1.0f);
  const auto start = Clock::now();
  while (std::chrono::duration<double, std::milli>(Clock::now() - start).count() < limitMs) {
    const cfxResult_t r = cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr);
    if (r != cfxSuccess) return r;
  }
  return cfxSuccess;
}

conflux::trace::CommReport analyzeDir(const TraceDir& dir) {
  auto reports = conflux::trace::analyze(conflux::trace::loadDumps(dir.str()));
  EXPECT_EQ(reports.size(), 1u);
  return reports.empty() ? conflux::trace::CommReport{} : reports.front();
}

constexpr size_t kPlanCount = size_t{1} << 15;  // 128 KiB: a plan, not the eager path (64 KiB at most)

}  // namespace

TEST(FlightRecorder, StoppedRankIsTheSuspect) {
  TraceDir dir;
  RunOptions opts;
  opts.env = {{"CONFLUX_TIMEOUT_MS", "1500"}, {"CONFLUX_TRACE_DIR", dir.str()}};
  opts.whileRunning = [&dir](const std::vector<int>& pids) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    kill(pids[2], SIGSTOP);
    // The others time out and write their dumps; then rank 2 goes on, meets the error and writes its own.
    EXPECT_TRUE(dir.waitForDumps(2, 30)) << "ranks 0 and 1 wrote no dumps";
    kill(pids[2], SIGCONT);
  };
  auto out = runRanks(3, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    EXPECT_NE(allReduceUntilError(comm, kPlanCount, 60000), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
  EXPECT_EQ(dir.dumps(), 3u);
  const auto rep = analyzeDir(dir);
  EXPECT_GT(rep.divergedAt, 0u);
  ASSERT_FALSE(rep.suspects.empty());
  EXPECT_EQ(rep.suspects.front(), 2) << conflux::trace::toText({rep});
  const auto [rc, text] = runConfluxTrace(dir.str());
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("suspect: rank 2"), std::string::npos) << text;
  EXPECT_NE(text.find("waiting for rank 2"), std::string::npos) << text;
}

TEST(FlightRecorder, KilledRankIsTheSuspect) {
  TraceDir dir;
  RunOptions opts;
  opts.env = {{"CONFLUX_TRACE_DIR", dir.str()}};
  opts.whileRunning = [](const std::vector<int>& pids) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    kill(pids[1], SIGKILL);
  };
  auto out = runRanks(4, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    EXPECT_EQ(allReduceUntilError(comm, kPlanCount, 60000), cfxRemoteError);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  EXPECT_EQ(out[1].signal, SIGKILL);
  for (int r : {0, 2, 3}) EXPECT_TRUE(out[r].ok()) << out[r].describe();
  const auto rep = analyzeDir(dir);
  EXPECT_EQ(rep.dumped, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(rep.missing, std::vector<int>{1});
  ASSERT_FALSE(rep.suspects.empty());
  EXPECT_EQ(rep.suspects.front(), 1) << conflux::trace::toText({rep});
  ASSERT_TRUE(rep.firstError.has_value());
  EXPECT_EQ(rep.firstError->code, "remote_error");
  const auto [rc, text] = runConfluxTrace(dir.str());
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("suspect: rank 1: wrote no dump"), std::string::npos) << text;
}

TEST(FlightRecorder, MismatchedCallNamesTheOddRank) {
  TraceDir dir;
  RunOptions opts;
  opts.env = {{"CONFLUX_TRACE_DIR", dir.str()}};
  auto out = runRanks(3, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    std::vector<float> buf(kPlanCount, 1.0f);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    }
    const size_t count = rank == 1 ? kPlanCount / 2 : kPlanCount;
    EXPECT_EQ(cfxAllReduce(buf.data(), buf.data(), count, cfxFloat32, cfxSum, comm, nullptr), cfxInvalidUsage);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
  EXPECT_EQ(dir.dumps(), 3u);
  const auto rep = analyzeDir(dir);
  EXPECT_EQ(rep.lastCommon, 5u);
  EXPECT_EQ(rep.divergedAt, 6u);
  EXPECT_NE(rep.mismatch.find("call #6"), std::string::npos) << rep.mismatch;
  ASSERT_FALSE(rep.suspects.empty());
  EXPECT_EQ(rep.suspects.front(), 1) << conflux::trace::toText({rep});
  const auto [rc, text] = runConfluxTrace(dir.str());
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("arguments differ at call #6"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1 called allreduce " + std::to_string(kPlanCount / 2) + " x float32 sum"), std::string::npos)
      << text;
}

TEST(FlightRecorder, SignalDumpsAHealthyJobAndAnErrorFreeJobWritesNothing) {
  TraceDir dir;
  const fs::path ready = fs::path(dir.str()) / "ready";
  fs::create_directories(ready);
  RunOptions opts;
  opts.env = {{"CONFLUX_TRACE_DIR", dir.str()}, {"CONFLUX_TRACE_SIGNAL", "1"}};
  opts.whileRunning = [&](const std::vector<int>& pids) {
    // Only once every rank has its communicator (and with it the handler) may the signal come.
    const auto end = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < end && std::distance(fs::directory_iterator(ready), fs::directory_iterator()) < 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (int pid : pids) kill(pid, SIGUSR1);
  };
  auto out = runRanks(2, [&ready](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    std::vector<float> buf(256, 1.0f);
    EXPECT_EQ(cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    std::ofstream(ready / std::to_string(rank)).put('1');
    for (int i = 0; i < 30; ++i) {  // the same calls on both ranks, for about 3 s
      EXPECT_EQ(cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
  auto dumps = conflux::trace::loadDumps(dir.str());
  ASSERT_EQ(dumps.size(), 2u);
  for (const auto& d : dumps) {
    EXPECT_EQ(d.reason, "signal");
    EXPECT_FALSE(d.error.has_value());
    EXPECT_GE(d.calls.size(), 1u);
    EXPECT_EQ(d.calls.front().seq, 1u);
    EXPECT_EQ(d.calls.front().state, "completed");
  }

  // Without errors or signals, nothing is written.
  TraceDir quiet;
  RunOptions calm;
  calm.env = {{"CONFLUX_TRACE_DIR", quiet.str()}};
  out = runRanks(2, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    std::vector<float> buf(1024, 1.0f);
    for (int i = 0; i < 200; ++i) {
      EXPECT_EQ(cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    }
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, calm);
  EXPECT_TRUE(allSucceeded(out));
  EXPECT_EQ(quiet.dumps(), 0u);
}
