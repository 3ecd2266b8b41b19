// The thread-safety contract of conflux.h, point by point, on real processes with several threads each:
// communicators made and driven on threads of their own at once (with a thread polling their state),
// threads sharing one communicator, groups that belong to their thread, an abort from another thread,
// and the C++ API's asynchronous requests waited for on another thread. The tsan preset runs it under
// ThreadSanitizer (tools/run-tsan.sh).
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "conflux/conflux.hpp"
#include "tests/multiproc/harness.h"

using namespace conflux::testing;

namespace {

/// `calls` mixed collectives on `comm`, each checked: all-reduces of 3 and 50000 floats, an all-gather
/// and a broadcast. `salt` tells the communicators' results apart.
bool mixedCalls(cfxComm_t comm, int rank, int n, int salt, int calls) {
  bool ok = true;
  for (int i = 0; i < calls && ok; ++i) {
    const size_t count = i % 2 == 0 ? 3 : 50000;
    std::vector<float> v(count, float(rank + salt));
    ok = cfxAllReduce(v.data(), v.data(), count, cfxFloat32, cfxSum, comm, nullptr) == cfxSuccess;
    const float want = float(n * (n - 1) / 2 + n * salt);
    ok = ok && v.front() == want && v.back() == want;
    std::vector<int32_t> mine(5, rank * 100 + salt), all(size_t(5 * n), -1);
    ok = ok && cfxAllGather(mine.data(), all.data(), 5, cfxInt32, comm, nullptr) == cfxSuccess;
    for (int r = 0; r < n && ok; ++r) ok = all[size_t(r * 5 + 4)] == r * 100 + salt;
    std::vector<int64_t> b(1000, rank == i % n ? int64_t(salt) * 7 + i : -1);
    ok = ok && cfxBroadcast(b.data(), b.data(), b.size(), cfxInt64, i % n, comm, nullptr) == cfxSuccess;
    ok = ok && b.back() == int64_t(salt) * 7 + i;
  }
  if (!ok) ADD_FAILURE() << "rank " << rank << ", communicator " << salt << ": " << cfxGetLastError(comm);
  return ok;
}

cfxUniqueId uniqueIdFromWorld(cfxComm_t world, int rank) {
  cfxUniqueId id{};
  if (rank == 0) {
    EXPECT_EQ(cfxGetUniqueId(&id), cfxSuccess);
  }
  EXPECT_EQ(cfxBroadcast(id.internal, id.internal, sizeof id.internal, cfxUint8, 0, world, nullptr), cfxSuccess);
  return id;
}

// Three communicators per rank, each made (cfxCommInitRank, at the same time) and driven on a thread of its
// own, while a fourth thread polls every one's state; then each destroys its own.
TEST(ThreadSafety, CommunicatorsOnThreadsOfTheirOwn) {
  auto out = runRanks(3, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t world;
    if (cfxCommInitRank(&world, n, id, rank) != cfxSuccess) return 2;
    constexpr int kComms = 3;
    std::array<cfxUniqueId, kComms> ids;
    for (auto& i : ids) i = uniqueIdFromWorld(world, rank);
    std::array<std::atomic<cfxComm_t>, kComms> comms{};
    std::atomic<bool> done{false};
    std::atomic<int> polls{0};
    std::thread poller([&] {
      while (!done.load()) {
        for (auto& c : comms) {
          cfxComm_t comm = c.load();
          if (comm == nullptr) continue;
          cfxResult_t e = cfxInternalError;
          int size = 0, r = -1, lr = -1, ls = 0;
          EXPECT_EQ(cfxCommGetAsyncError(comm, &e), cfxSuccess);
          EXPECT_EQ(e, cfxSuccess);
          EXPECT_EQ(cfxCommCount(comm, &size), cfxSuccess);
          EXPECT_EQ(cfxCommUserRank(comm, &r), cfxSuccess);
          EXPECT_EQ(cfxCommLocalRank(comm, &lr, &ls), cfxSuccess);
          EXPECT_EQ(size, n);
          EXPECT_EQ(r, rank);
          ++polls;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    std::vector<std::thread> drivers;
    std::array<std::atomic<bool>, kComms> ok{};
    std::atomic<int> finished{0};
    for (int c = 0; c < kComms; ++c) {
      drivers.emplace_back([&, c] {
        cfxComm_t comm = nullptr;
        if (cfxCommInitRank(&comm, n, ids[size_t(c)], rank) != cfxSuccess) {
          ADD_FAILURE() << "init of communicator " << c << ": " << cfxGetLastError(nullptr);
          return;
        }
        comms[size_t(c)].store(comm);
        ok[size_t(c)] = mixedCalls(comm, rank, n, c + 1, 60);
        // Every driver is done with its calls before any communicator goes: the poller holds them. They
        // also wait for the poller to have polled (a loaded machine may not have run it yet; at most 10 s).
        ++finished;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (finished.load() < kComms || (polls.load() == 0 && std::chrono::steady_clock::now() < deadline)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      });
    }
    for (auto& d : drivers) d.join();
    done = true;
    poller.join();
    for (int c = 0; c < kComms; ++c) {
      EXPECT_TRUE(ok[size_t(c)].load()) << "communicator " << c;
      if (cfxComm_t comm = comms[size_t(c)].load()) {
        EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
      }
    }
    EXPECT_GT(polls.load(), 0);
    EXPECT_EQ(cfxCommDestroy(world), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

// Four threads per rank share one communicator, all making the same all-reduces (so whichever calls pair
// up across ranks, the sums are right): the calls run one at a time and every result is right.
TEST(ThreadSafety, ThreadsShareOneCommunicator) {
  auto out = runRanks(3, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    std::atomic<int> wrong{0};
    for (size_t count : {size_t{5}, size_t{30000}}) {  // small (eager) calls, then large (a plan)
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
          for (int i = 0; i < 50; ++i) {
            std::vector<double> v(count, rank + 1.0);
            if (cfxAllReduce(v.data(), v.data(), v.size(), cfxFloat64, cfxSum, comm, nullptr) != cfxSuccess ||
                v.front() != n * (n + 1) / 2.0 || v.back() != n * (n + 1) / 2.0) {
              ++wrong;
              ADD_FAILURE() << "thread " << t << " call " << i << ": " << cfxGetLastError(comm);
              return;
            }
          }
        });
      }
      for (auto& th : threads) th.join();
    }
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

// A group collects the calls of its own thread only: while thread A holds a group open on one
// communicator (a send/recv ring queued), thread B's all-reduce on another runs at once.
TEST(ThreadSafety, GroupsBelongToTheirThread) {
  auto out = runRanks(3, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t a, b;
    if (cfxCommInitRank(&a, n, id, rank) != cfxSuccess) return 2;
    const cfxUniqueId idB = uniqueIdFromWorld(a, rank);
    if (cfxCommInitRank(&b, n, idB, rank) != cfxSuccess) return 2;
    std::atomic<bool> bDone{false};
    std::vector<int> sendBuf(100, rank), recvBuf(100, -1);
    std::thread threadA([&] {
      EXPECT_EQ(cfxGroupStart(), cfxSuccess);
      EXPECT_EQ(cfxSend(sendBuf.data(), 100, cfxInt32, (rank + 1) % n, a, nullptr), cfxSuccess);
      EXPECT_EQ(cfxRecv(recvBuf.data(), 100, cfxInt32, (rank + n - 1) % n, a, nullptr), cfxSuccess);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!bDone.load() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_TRUE(bDone.load()) << "thread B's call waited for thread A's group";
      EXPECT_EQ(cfxGroupEnd(), cfxSuccess) << cfxGetLastError(a);
    });
    std::thread threadB([&] {
      std::vector<float> v(1000, 1.0f);
      EXPECT_EQ(cfxAllReduce(v.data(), v.data(), v.size(), cfxFloat32, cfxSum, b, nullptr), cfxSuccess);
      EXPECT_EQ(v[999], float(n));
      bDone = true;
    });
    threadA.join();
    threadB.join();
    EXPECT_EQ(recvBuf[99], (rank + n - 1) % n);
    EXPECT_EQ(cfxCommDestroy(b), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(a), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

// cfxCommAbort from another thread ends a call blocked on a rank that never comes, within milliseconds.
TEST(ThreadSafety, AbortFromAnotherThreadEndsABlockedCall) {
  auto out = runRanks(2, [](int rank, int n, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, n, id, rank) != cfxSuccess) return 2;
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // never calls; leaves after rank 0
      EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
      return 0;
    }
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      EXPECT_EQ(cfxCommAbort(comm), cfxSuccess);
    });
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> v(100000, 1.0f);
    EXPECT_EQ(cfxAllReduce(v.data(), v.data(), v.size(), cfxFloat32, cfxSum, comm, nullptr), cfxAborted);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(ms, 1200.0);
    aborter.join();
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

// The C++ API: asynchronous all-reduces issued on one thread and waited for on another, in issue order.
TEST(ThreadSafety, CppRequestsWaitedOnAnotherThread) {
  auto out = runRanks(2, [](int rank, int n, const cfxUniqueId& rawId) -> int {
    std::array<char, CFX_UNIQUE_ID_BYTES> bytes;
    std::memcpy(bytes.data(), rawId.internal, bytes.size());
    conflux::Communicator comm(n, conflux::UniqueId::fromBytes(bytes), rank);
    constexpr int kCalls = 40;
    std::vector<std::vector<float>> bufs(kCalls);
    std::vector<conflux::Request> reqs;
    for (int i = 0; i < kCalls; ++i) {
      bufs[size_t(i)].assign(i % 2 == 0 ? 7 : 40000, float(rank + i));
      reqs.push_back(comm.allReduceAsync(std::span<const float>(bufs[size_t(i)]), std::span<float>(bufs[size_t(i)])));
    }
    std::thread waiter([&] {
      for (auto& r : reqs) r.wait();
    });
    waiter.join();
    for (int i = 0; i < kCalls; ++i) {
      const float want = float(0 + i + 1 + i);
      EXPECT_EQ(bufs[size_t(i)].front(), want) << "call " << i;
      EXPECT_EQ(bufs[size_t(i)].back(), want) << "call " << i;
    }
    return 0;
  });
  EXPECT_TRUE(allSucceeded(out));
}

}  // namespace
