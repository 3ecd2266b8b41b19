// The executor in one process, over the fake message transport (fake_transport.h): every rank is a thread
// on a node of its own (executor_cluster.h), so every message of its plan goes through the transport,
// which delays and reorders completions and can fail an operation. Each message-passing algorithm's plans
// for every collective it supports, on 2, 3 and 5 ranks and odd counts, give what a reference computed
// here says; a send/recv batch matches by order; an injected failure ends the call on the failing rank
// with the transport's message and on the others within the timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "executor_cluster.h"

namespace {

using namespace executortest;

/// A cluster of `nranks` ranks, each alone on its node: every message goes through the transport.
ClusterShape eachRankAlone(int nranks, Faults faults, int timeoutMs = 20000) {
  ClusterShape shape;
  for (int r = 0; r < nranks; ++r) shape.nodeOf.push_back(r);
  shape.net = faults;
  shape.timeoutMs = timeoutMs;
  return shape;
}

/// Runs `plan` as call 1 over 16 int32 elements, from `in` into `out`.
Status executeInt32(const Plan& plan, std::vector<int32_t>& in, std::vector<int32_t>& out, RankEnv& rank) {
  ExecBuffers bufs;
  bufs.send = reinterpret_cast<const std::byte*>(in.data());
  bufs.recv = reinterpret_cast<std::byte*>(out.data());
  ExecCall call;
  call.dtype = DataType::Int32;
  call.count = 16;
  call.seq = 1;
  return execute(plan, bufs, call, rank.env, rank.work);
}

/// Checks `a`'s plans for `c` over 61 elements on `cluster`, and that the run lasted at least `minMs`: a
/// message slower than the timeout, else a test of slow links proves nothing.
void checkSlowRun(Cluster& cluster, Algo a, Collective c, const std::string& what, int minMs) {
  const auto start = std::chrono::steady_clock::now();
  checkCollective(cluster, a, c, 61, describeRun(a, c, what, 61, 0));
  if (::testing::Test::HasFatalFailure()) return;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(ms, minMs) << "a message took longer than the timeout, else this proves nothing";
}

// The executor's tag layout (transport/transport.h): calls 1..4095 and on wrap around without touching
// call 0, which belongs to the cost probe and the failure notices; point-to-point tags never meet either.
TEST(MessageTags, CallZeroStaysFreeForSetUpAndNotices) {
  using transport::collectiveTag;
  EXPECT_EQ(collectiveTag(3, 1) & 0xfff, 1u);
  EXPECT_EQ(collectiveTag(3, 4095) & 0xfff, 4095u);
  EXPECT_EQ(collectiveTag(3, 4096), collectiveTag(3, 1));  // wraps past 0
  EXPECT_EQ(collectiveTag(3, 8191), collectiveTag(3, 1));
  for (uint32_t call = 1; call < 3 * 4096u; call += 7) {
    ASSERT_NE(collectiveTag(0x7ff, call), transport::kFailureNoticeTag) << call;
    ASSERT_NE(collectiveTag(0, call) & 0xfff, 0u) << call;
  }
  EXPECT_EQ(transport::kFailureNoticeTag & transport::kP2pTagBit, 0u);
  EXPECT_NE(transport::p2pTag(transport::kFailureNoticeTag), transport::kFailureNoticeTag);
  EXPECT_LE(transport::kFailureNoticeTag, transport::MessageTransport::kMaxTag);
}

TEST(ExecutorOverFakeTransport, EveryMessagePassingPlanWithDelaysAndReordering) {
  const Algo algos[] = {Algo::Ring, Algo::RecHalvingDoubling, Algo::BinomialTree, Algo::DoubleBinaryTree,
                        Algo::Pairwise};
  const Collective colls[] = {Collective::AllReduce, Collective::Reduce, Collective::Broadcast,
                              Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll};
  int runs = 0;
  uint32_t seed = 1;
  for (Algo a : algos) {
    for (Collective c : colls) {
      for (int n : {2, 3, 5}) {
        if (!algoSupports(a, c, n)) continue;
        for (uint64_t count : {uint64_t{1}, uint64_t{1037}}) {
          Cluster cluster(eachRankAlone(n, Faults{seed, 6, -1, 0}));
          checkCollective(cluster, a, c, count, describeRun(a, c, std::to_string(n) + " ranks", count, seed));
          ++seed;
          ++runs;
          if (HasFatalFailure()) return;
        }
      }
    }
  }
  EXPECT_GE(runs, 60) << "every message-passing algorithm ran";
}

// Two ranks each receive first and send second, in two rounds: round by round (window 1) neither
// reaches its send and both time out; with a window of two rounds the sends, which touch no byte the
// receives write, start at once and both calls complete with the peer's data. (Not a valid plan, the
// simulator would call it a deadlock: it only shows that the executor runs ahead.)
TEST(ExecutorOverFakeTransport, OperationsRunAheadOfUnfinishedRoundsTheyDoNotDependOn) {
  for (int window : {1, 2}) {
    ClusterShape sh = eachRankAlone(2, Faults{7, 2, -1, 0});
    sh.timeoutMs = 300;
    Cluster cluster(sh);
    std::vector<std::vector<int32_t>> in(2), out(2);
    auto status = cluster.run([&](int r, RankEnv& rank) -> Status {
      rank.env.windowRounds = window;
      in[size_t(r)].assign(16, 100 + r);
      out[size_t(r)].assign(16, 0);
      PlanBuilder b("ahead");
      b.recv(1 - r, BufRef::recv(0), 64);
      b.nextRound();
      b.send(1 - r, BufRef::send(0), 64);
      return executeInt32(b.finish(), in[size_t(r)], out[size_t(r)], rank);
    });
    for (int r = 0; r < 2; ++r) {
      if (window == 1) {
        EXPECT_EQ(status[size_t(r)].code(), Code::Timeout) << "rank " << r << ": " << status[size_t(r)].message();
      } else {
        ASSERT_TRUE(status[size_t(r)].isOk()) << "rank " << r << ": " << status[size_t(r)].message();
        EXPECT_EQ(out[size_t(r)][15], 100 + (1 - r));
      }
    }
  }
}

// A send/recv batch: rank 0 sends three messages to rank 2 with one plan, rank 2 receives them with three
// plans of one receive each; they match in order whatever the delays (point-to-point tags count messages
// between the pair, not calls).
TEST(ExecutorOverFakeTransport, PointToPointMatchesInOrderAcrossBatches) {
  Cluster cluster(eachRankAlone(3, Faults{99, 8, -1, 0}));
  std::vector<std::vector<int32_t>> got(3, std::vector<int32_t>(100, 0));
  auto status = cluster.run([&](int r, RankEnv& rank) -> Status {
    ExecCall call;
    call.coll = Collective::SendRecv;
    call.dtype = DataType::Uint8;
    if (r == 0) {
      std::vector<std::vector<int32_t>> out(3);
      PlanBuilder b("sendrecv");
      for (int k = 0; k < 3; ++k) {
        out[size_t(k)].assign(100, 10 + k);
        b.send(2, BufRef::send(reinterpret_cast<uintptr_t>(out[size_t(k)].data())), 400);
      }
      return execute(b.finish(), ExecBuffers{}, call, rank.env, rank.work);
    }
    if (r == 2) {
      for (int k = 0; k < 3; ++k) {
        PlanBuilder b("sendrecv");
        b.recv(0, BufRef::recv(reinterpret_cast<uintptr_t>(got[size_t(k)].data())), 400);
        if (Status s = execute(b.finish(), ExecBuffers{}, call, rank.env, rank.work); !s) return s;
      }
    }
    return Status::ok();
  });
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(status[size_t(r)].isOk()) << "rank " << r << ": " << status[size_t(r)].message();
  for (int k = 0; k < 3; ++k) EXPECT_EQ(got[size_t(k)][99], 10 + k) << "message " << k << " arrived out of order";
  EXPECT_EQ(cluster.fabric().unmatched(), 0u);
}

// The 3rd operation rank 1 posts fails: rank 1's call ends with the transport's error, the others (whose
// messages from rank 1 never come) with an error of their own within the timeout, never a hang.
TEST(ExecutorOverFakeTransport, AnInjectedFailureEndsTheCallOnEveryRank) {
  constexpr int kTimeoutMs = 400;
  Cluster cluster(eachRankAlone(4, Faults{7, 3, 1, 3}, kTimeoutMs));
  const auto start = std::chrono::steady_clock::now();
  auto status = cluster.run([&](int r, RankEnv& rank) -> Status { return ringAllReduce(cluster, r, rank); });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(status[1].code(), Code::RemoteError) << status[1].message();
  EXPECT_NE(status[1].message().find("injected failure of rank 1's operation 3"), std::string::npos)
      << status[1].message();
  EXPECT_NE(status[1].message().find("[during allreduce (call #1, ring"), std::string::npos)
      << "the executor says where: " << status[1].message();
  for (int r : {0, 2, 3}) EXPECT_FALSE(status[size_t(r)].isOk()) << "rank " << r << " finished without rank 1's data";
  EXPECT_LT(secs, 10.0) << "every rank ended within the timeout (" << kTimeoutMs << " ms) and a margin";
}

// A slow but alive link: every message takes three timeouts to move, its bytes moving all along. That is
// progress, not a stuck peer: every rank completes and every result is right. (In these schedules every
// rank has a message in flight in every round; a rank that waits with nothing in flight is the next test.)
TEST(ExecutorOverFakeTransport, ASlowLinkWhoseBytesKeepMovingIsNotATimeout) {
  constexpr int kTimeoutMs = 150;
  Faults slow;
  slow.deliveryMs = 3 * kTimeoutMs;
  for (auto [a, n] : {std::pair{Algo::Ring, 3}, std::pair{Algo::RecHalvingDoubling, 4}, std::pair{Algo::Pairwise, 3}}) {
    const Collective c = a == Algo::Pairwise ? Collective::AllToAll : Collective::AllReduce;
    Cluster cluster(eachRankAlone(n, slow, kTimeoutMs));
    checkSlowRun(cluster, a, c, std::to_string(n) + " slow nodes", 3 * kTimeoutMs);
    if (HasFatalFailure()) return;
  }
}

// The same link, seen by a transport that cannot tell how much of a message moved: nothing changes for
// longer than the timeout, and every rank fails with a timeout (what the test above would see if the
// executor ignored movedBytes).
TEST(ExecutorOverFakeTransport, ASlowMessageThatShowsNoBytesMovingTimesOut) {
  constexpr int kTimeoutMs = 150;
  Faults slow;
  slow.deliveryMs = 3 * kTimeoutMs;
  slow.countsBytes = false;
  std::vector<std::vector<float>> data(3, std::vector<float>(64, 1.0f));  // outlives the cluster (ringAllReduce)
  Cluster cluster(eachRankAlone(3, slow, kTimeoutMs));
  auto status = cluster.run([&](int r, RankEnv& rank) -> Status { return ringAllReduce(cluster, r, rank, data[size_t(r)]); });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(status[size_t(r)].code(), Code::Timeout) << "rank " << r << ": " << status[size_t(r)].message();
    EXPECT_NE(status[size_t(r)].message().find("no progress"), std::string::npos) << status[size_t(r)].message();
  }
}

// Only rank 3's links are slow, in a ring of 4 ranks each on its own node: rank 1 receives from rank 0
// and sends to rank 2 over fast links, so it has nothing in flight while it waits for rank 0, which
// itself waits for rank 3's slow bytes. Rank 0 tells it so (tellProgress), and nobody times out.
TEST(ExecutorOverFakeTransport, ARankWaitingForAWaitingRankOnAnotherNodeIsToldItsProgress) {
  constexpr int kTimeoutMs = 150;
  Faults slow;
  slow.deliveryMs = 3 * kTimeoutMs;
  slow.slowRank = 3;
  Cluster cluster(eachRankAlone(4, slow, kTimeoutMs));
  checkSlowRun(cluster, Algo::Ring, Collective::AllReduce, "rank 3 slow", 3 * kTimeoutMs);
}

// The same ring with the notices lost: rank 1 sees nothing move for longer than the timeout and fails,
// naming the rank it waited for (what the test above would see without the notices).
TEST(ExecutorOverFakeTransport, WithoutProgressNoticesARankWaitingForAWaitingRankTimesOut) {
  constexpr int kTimeoutMs = 150;
  Faults slow;
  slow.deliveryMs = 3 * kTimeoutMs;
  slow.slowRank = 3;
  slow.tellsProgress = false;
  std::vector<std::vector<float>> data(4, std::vector<float>(64, 1.0f));  // outlives the cluster (ringAllReduce)
  Cluster cluster(eachRankAlone(4, slow, kTimeoutMs));
  auto status = cluster.run([&](int r, RankEnv& rank) -> Status { return ringAllReduce(cluster, r, rank, data[size_t(r)]); });
  EXPECT_EQ(status[1].code(), Code::Timeout) << status[1].message();
  EXPECT_NE(status[1].message().find("no progress"), std::string::npos) << status[1].message();
}

// Ranks that wait for each other in a cycle across nodes, telling each other their progress: a notice is
// read 8 ms after it is sent (at a 10 ms notice interval), so every hop makes the time it carries look
// 8 ms newer. Both still time out, soon after the timeout. (When a notice is read just as the reader
// tells its own, every hop adds its delay and nothing else; passed on without end, such times would keep
// up with the clock. The next test checks the bound on hops that prevents it.)
TEST(ExecutorOverFakeTransport, RanksWaitingForEachOtherAcrossNodesTimeOutThoughNoticesArriveLate) {
  Faults late;
  late.noticeDelayMs = 8;
  ClusterShape sh = eachRankAlone(2, late, 40);
  Cluster cluster(sh);
  const auto start = std::chrono::steady_clock::now();
  auto status = cluster.run([&](int r, RankEnv& rank) -> Status {
    std::vector<int32_t> in(16, r), out(16, 0);
    PlanBuilder b("cycle");
    b.recv(1 - r, BufRef::recv(0), 64);  // each waits for the other's message before sending its own
    b.nextRound();
    b.send(1 - r, BufRef::send(0), 64);
    return executeInt32(b.finish(), in, out, rank);
  });
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (int r = 0; r < 2; ++r) EXPECT_EQ(status[size_t(r)].code(), Code::Timeout) << "rank " << r << ": " << status[size_t(r)].message();
  EXPECT_LT(ms, 3000) << "the cycle outlived its timeout (40 ms) by far";
}

// A time told through kMaxProgressHops notices is not taken; one told through one fewer is. Rank 1 sends
// four timeouts late, and every notice rank 0 reads says rank 1 progressed just now, through that many
// hops: rank 0 waits for it with the smaller count and times out with the larger.
TEST(ExecutorOverFakeTransport, ProgressToldThroughTooManyNoticesIsNotTaken) {
  constexpr int kTimeoutMs = 100;
  for (uint32_t hops : {transport::MessageTransport::kMaxProgressHops - 1, transport::MessageTransport::kMaxProgressHops}) {
    Faults forged;
    forged.forgedNoticeHops = int(hops);
    // Outlive the cluster: rank 1's message lands after rank 0 timed out.
    std::vector<std::vector<int32_t>> in(2, std::vector<int32_t>(16, 7)), out(2, std::vector<int32_t>(16, 0));
    Cluster cluster(eachRankAlone(2, forged, kTimeoutMs));
    auto status = cluster.run([&](int r, RankEnv& rank) -> Status {
      PlanBuilder b("late");
      if (r == 0) {
        b.recv(1, BufRef::recv(0), 64);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(4 * kTimeoutMs));
        b.send(0, BufRef::send(0), 64);
      }
      return executeInt32(b.finish(), in[size_t(r)], out[size_t(r)], rank);
    });
    if (hops < transport::MessageTransport::kMaxProgressHops) {
      EXPECT_TRUE(status[0].isOk()) << hops << " hops: " << status[0].message();
    } else {
      EXPECT_EQ(status[0].code(), Code::Timeout) << hops << " hops: " << status[0].message();
    }
  }
}

// A chain of waits that crosses nodes through shared memory as well as through notices: rank 1 waits
// for its node-mate rank 0, which waits for rank 2 on another node, which waits for its node-mate rank 3,
// which receives rank 4's message over a slow link (three timeouts, its bytes moving). Rank 3's progress
// reaches rank 2 through shared memory, rank 0 through a notice and rank 1 through shared memory again:
// nobody times out. (With shared memory counted as most of the hop bound, rank 0 could take the time
// for itself but pass it on no further, and rank 1 timed out.)
TEST(ExecutorOverFakeTransport, ProgressCrossesNodesAndSharedMemoryAlongOneChain) {
  constexpr int kTimeoutMs = 150;
  ClusterShape shape;
  shape.nodeOf = {0, 0, 1, 1, 2};
  shape.net.deliveryMs = 3 * kTimeoutMs;
  shape.net.slowRank = 4;
  shape.timeoutMs = kTimeoutMs;
  std::vector<std::vector<int32_t>> in(5, std::vector<int32_t>(16, 9)), out(5, std::vector<int32_t>(16, 0));
  Cluster cluster(shape);
  const int waitsFor[5] = {2, 0, 3, 4, -1};
  const int sendsTo[5] = {1, -1, 0, 2, 3};
  const auto start = std::chrono::steady_clock::now();
  auto status = cluster.run([&](int r, RankEnv& rank) -> Status {
    PlanBuilder b("chain");
    if (waitsFor[r] >= 0) b.recv(waitsFor[r], BufRef::recv(0), 64);
    b.nextRound();
    if (sendsTo[r] >= 0) b.send(sendsTo[r], waitsFor[r] >= 0 ? BufRef::recv(0) : BufRef::send(0), 64);
    return executeInt32(b.finish(), in[size_t(r)], out[size_t(r)], rank);
  });
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (int r = 0; r < 5; ++r) EXPECT_TRUE(status[size_t(r)].isOk()) << "rank " << r << ": " << status[size_t(r)].message();
  EXPECT_EQ(out[1], in[4]) << "rank 4's data did not reach the end of the chain";
  EXPECT_GE(ms, 3 * kTimeoutMs) << "the slow message took longer than the timeout, else this proves nothing";
}

// A cycle of waits through both kinds of link: rank 0 waits for rank 2 on another node, rank 2 for its
// node-mate rank 3, rank 3 for rank 1 on the first node, rank 1 for its node-mate rank 0. Notices are
// read 8 ms late, so each crossing makes the time it carries look newer; shared memory adds no hop and
// no delay. Nobody makes progress, and every rank times out soon after the timeout: no link, shared
// memory included, passes on a time newer than what it was given. (The hop bound that stops the
// crossings' delays from adding up without end is checked by ProgressToldThroughTooManyNoticesIsNotTaken.)
TEST(ExecutorOverFakeTransport, ACycleThroughSharedMemoryAndNoticesTimesOut) {
  ClusterShape shape;
  shape.nodeOf = {0, 0, 1, 1};
  shape.net.noticeDelayMs = 8;
  shape.timeoutMs = 40;
  std::vector<std::vector<int32_t>> in(4, std::vector<int32_t>(16, 3)), out(4, std::vector<int32_t>(16, 0));
  Cluster cluster(shape);
  const int waitsFor[4] = {2, 0, 3, 1};
  const int sendsTo[4] = {1, 3, 0, 2};
  const auto start = std::chrono::steady_clock::now();
  auto status = cluster.run([&](int r, RankEnv& rank) -> Status {
    PlanBuilder b("cycle");
    b.recv(waitsFor[r], BufRef::recv(0), 64);  // each waits before it sends: nobody ever sends
    b.nextRound();
    b.send(sendsTo[r], BufRef::send(0), 64);
    return executeInt32(b.finish(), in[size_t(r)], out[size_t(r)], rank);
  });
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (int r = 0; r < 4; ++r) EXPECT_FALSE(status[size_t(r)].isOk()) << "rank " << r;
  EXPECT_LT(ms, 3000) << "the cycle outlived its timeout (40 ms) by far";
}

// A chain behind a rank that is truly stuck (its messages never move, and show no bytes moving), with
// notices on: the ranks that wait for it, and those that wait for them, all time out.
TEST(ExecutorOverFakeTransport, AChainBehindAStuckRankTimesOutWithNoticesOn) {
  constexpr int kTimeoutMs = 150;
  Faults stuck;
  stuck.deliveryMs = 60000;
  stuck.slowRank = 3;
  stuck.countsBytes = false;
  std::vector<std::vector<float>> data(4, std::vector<float>(64, 1.0f));  // outlives the cluster: ranks fail at different times
  Cluster cluster(eachRankAlone(4, stuck, kTimeoutMs));
  const auto start = std::chrono::steady_clock::now();
  auto status = cluster.run([&](int r, RankEnv& rank) -> Status { return ringAllReduce(cluster, r, rank, data[size_t(r)]); });
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (int r = 0; r < 4; ++r) EXPECT_FALSE(status[size_t(r)].isOk()) << "rank " << r;
  EXPECT_EQ(status[1].code(), Code::Timeout) << status[1].message();
  EXPECT_LT(ms, 20 * kTimeoutMs) << "the ranks behind the stuck one took far longer than the timeout";
}

}  // namespace
