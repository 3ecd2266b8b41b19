// The shared way to start ranks as processes (child_processes.h): exit codes, signals, deadlines, and the
// children's own failure text in the parent.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "tests/common/address_sanitizer.h"
#include "tests/common/child_processes.h"

namespace {

using conflux::testing::ChildOutcome;
using conflux::testing::ChildProcesses;
using namespace std::chrono_literals;

TEST(ChildProcesses, EachChildsEndAndItsOwnWordsReachTheParent) {
  ChildProcesses children(5);
  children.start([](int rank) {
    switch (rank) {
      case 0: return 0;
      case 1: EXPECT_EQ(rank, 7) << "rank one's complaint"; return 0;
      case 2: throw std::runtime_error("rank two threw");
      case 3: ::raise(SIGKILL); return 0;
      default: std::this_thread::sleep_for(30s); return 0;  // outlives the deadline
    }
  });
  const auto start = std::chrono::steady_clock::now();
  const std::vector<ChildOutcome> out = children.waitAll(3s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_TRUE(out[0].ok()) << out[0].describe();
  EXPECT_TRUE(out[0].failure.empty()) << out[0].failure;
  EXPECT_EQ(out[1].exitCode, 1);
  EXPECT_NE(out[1].failure.find("test_child_processes.cc:"), std::string::npos) << out[1].failure;
  EXPECT_NE(out[1].failure.find("rank one's complaint"), std::string::npos) << out[1].failure;
  EXPECT_NE(out[1].describe().find("rank 1 (pid "), std::string::npos) << out[1].describe();
  EXPECT_EQ(out[2].exitCode, 2);
  EXPECT_NE(out[2].failure.find("uncaught exception: rank two threw"), std::string::npos) << out[2].failure;
  EXPECT_EQ(out[3].signal, SIGKILL);
  EXPECT_FALSE(out[3].ok());
  EXPECT_TRUE(out[4].timedOut);
  EXPECT_NE(out[4].describe().find("timed out"), std::string::npos) << out[4].describe();
}

TEST(ChildProcesses, WaitForOneAndPidsOfTheRunning) {
  ChildProcesses children(2);
  children.start([](int rank) { return rank == 0 ? 0 : 9; });
  EXPECT_EQ(children.pids().size(), 2u);
  EXPECT_GT(children.pid(1), 0);
  EXPECT_EQ(children.wait(1, 10s).exitCode, 9);
  EXPECT_EQ(children.wait(1, 10s).exitCode, 9);  // asked again: the same outcome
  EXPECT_TRUE(children.wait(0, 10s).ok());
}

#if CONFLUX_TEST_ASAN
// Memory no pointer reaches any more, made in a frame that is gone by the time the check runs.
void* volatile gSink = nullptr;
__attribute__((noinline)) void leak() {
  for (int i = 0; i < 16; ++i) gSink = ::operator new(4096);
  gSink = nullptr;
}

TEST(ChildProcesses, ALeakInAChildFailsItInSanitizerBuilds) {
  ChildProcesses children(1);
  children.start([](int) {
    leak();
    return 0;
  });
  const ChildOutcome out = children.wait(0, 60s);
  EXPECT_EQ(out.exitCode, 1) << out.describe();
  EXPECT_NE(out.failure.find("LeakSanitizer found leaks"), std::string::npos) << out.describe();
}
#endif

}  // namespace
