// The executor in one process over the fake local group (fake_local_group.h): ranks are threads, the
// members of a node exchange bytes through small streams that accept short writes and stall at random,
// and nodes talk through the fake message transport, which delays and reorders (executor_cluster.h).
//   - Every plan algorithm for every collective it supports, on one node of 2, 3 and 5 ranks with odd
//     counts: the staging and direct plans too (barriers, staging, peers' own buffers).
//   - The plans across nodes (ring, trees, pairwise and the hierarchical ones) on 2x2, 3x2 and 1+2
//     ranks, where a rank's links mix local streams and network messages.
//   - Failures: a member that exits is an error naming it on every other member; a member that never
//     arrives makes the one waiting for it time out naming it and the others fail with its report;
//     members that disagree on the call's arguments fail naming the field.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "executor_cluster.h"
#include "src/rank_executor.h"  // kColdStreamBytes, kStreamMessageBytes

namespace {

using namespace executortest;

ClusterShape shape(std::vector<int> nodeOf, uint32_t seed, int timeoutMs = 20000) {
  ClusterShape s;
  s.nodeOf = std::move(nodeOf);
  s.net = Faults{seed, 4, -1, 0};
  s.group = GroupFaults{seed, 72, 5};
  s.timeoutMs = timeoutMs;
  return s;
}

std::string describe(Algo a, Collective c, const std::vector<int>& nodeOf, uint64_t count, uint32_t seed) {
  std::string nodes = "nodes ";
  for (int n : nodeOf) nodes += std::to_string(n);
  return describeRun(a, c, nodes, count, seed);
}

const Collective kCollectives[] = {Collective::AllReduce, Collective::Reduce, Collective::Broadcast,
                                   Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll};

bool hierarchical(Algo a) {
  return a == Algo::Hierarchical || a == Algo::HierarchicalRhd || a == Algo::HierarchicalDbtree;
}

TEST(ExecutorOverFakeLocalGroup, EveryPlanOnOneNodeWithShortWritesAndStalls) {
  int runs = 0;
  uint32_t seed = 1;
  for (Collective c : kCollectives) {
    for (Algo a : algosFor(c)) {
      if (hierarchical(a)) continue;
      for (int n : {2, 3, 5}) {
        if (!algoSupports(a, c, n)) continue;
        for (uint64_t count : {uint64_t{1}, uint64_t{1037}}) {
          const std::vector<int> nodeOf(size_t(n), 0);
          Cluster cluster(shape(nodeOf, seed));
          checkCollective(cluster, a, c, count, describe(a, c, nodeOf, count, seed));
          ++seed;
          ++runs;
          if (HasFatalFailure()) return;
        }
      }
    }
  }
  EXPECT_GE(runs, 80) << "every plan algorithm ran";
}

// A direct all-reduce past the streaming threshold (8 MiB, out of place): every piece is streamed to all
// ranks' recv buffers in one pass, including uneven slices (the count is not a multiple of the ranks).
TEST(ExecutorOverFakeLocalGroup, DirectAllReduceStreamsLargePiecesToEveryRank) {
  for (int n : {2, 3}) {
    const uint64_t count = (uint64_t{9} << 20) / 4 + 5;
    const std::vector<int> nodeOf(size_t(n), 0);
    Cluster cluster(shape(nodeOf, 11));
    checkCollective(cluster, Algo::Direct, Collective::AllReduce, count,
                    describe(Algo::Direct, Collective::AllReduce, nodeOf, count, 11));
    if (HasFatalFailure()) return;
  }
}

// CONFLUX_SHM_STREAM_STAGING (ExecEnv::streamStaging): the copies into staging stream, and nothing else
// changes; with auto (WhenFar) exactly while the local group says the cores are far apart. Warm, small
// enough that recv never streams: without streaming nothing streams; with it, one-shot all-gather streams
// every rank's input into its staging once (n blocks in all), and two-shot all-reduce the n - 1 slices
// each rank stages for its peers.
TEST(ExecutorOverFakeLocalGroup, StreamedStagingStreamsTheCopiesIntoStagingOnly) {
  using Policy = conflux::ExecEnv::StreamStaging;
  struct Case {
    Policy policy;
    bool far;
    bool streams;
  };
  const Case cases[] = {{Policy::Never, false, false}, {Policy::Never, true, false},  {Policy::Always, false, true},
                        {Policy::WhenFar, false, false}, {Policy::WhenFar, true, true}};
  const uint64_t count = 8191;
  for (int n : {2, 3}) {
    for (const Case& k : cases) {
      const std::vector<int> nodeOf(size_t(n), 0);
      for (Algo algo : {Algo::OneShot, Algo::TwoShot}) {
        const Collective c = algo == Algo::OneShot ? Collective::AllGather : Collective::AllReduce;
        ClusterShape sh = shape(nodeOf, 17);
        sh.group.coresFar = k.far;
        Cluster cluster(sh);
        for (int r = 0; r < n; ++r) cluster.rank(r).env.streamStaging = k.policy;
        std::vector<uint64_t> streamed;
        const std::string what = describe(algo, c, nodeOf, count, 17) + " policy " +
                                 std::to_string(static_cast<int>(k.policy)) + (k.far ? ", cores far apart" : ", cores close");
        checkCollective(cluster, algo, c, count, what, false, &streamed);
        if (HasFatalFailure()) return;
        uint64_t total = 0;
        for (uint64_t b : streamed) total += b;
        // All-gather: each rank stages its own block; all-reduce: each rank stages the n - 1 slices its
        // peers reduce, (n - 1) / n of the vector rounded to slices, so at least (n - 1) * (count / n).
        if (!k.streams) {
          EXPECT_EQ(total, 0u) << what;
        } else if (c == Collective::AllGather) {
          EXPECT_EQ(total, uint64_t(n) * count * 4) << what;
        } else {
          EXPECT_GE(total, uint64_t(n) * uint64_t(n - 1) * (count / uint64_t(n)) * 4) << what;
          EXPECT_LE(total, uint64_t(n) * count * 4) << what;
        }
      }
    }
  }
}

// Cold receive buffers (ExecCall::recvCold) from kColdStreamBytes, below kStreamMessageBytes, odd
// counts so tails are uneven. Two-shot copies every byte of recv out of staging, streamed when cold;
// one-shot writes recv by reductions (nothing to stream); direct from 1 MiB streams every rank's slice
// to all n receive buffers in one pass when cold, and to the n - 1 peers' only when warm (those lines
// are cold here either way). Otherwise warm calls of these sizes stream nothing.
TEST(ExecutorOverFakeLocalGroup, ColdReceiveBuffersGetEveryByteThroughStreamingCopies) {
  using conflux::exec::kColdStreamBytes;
  static_assert(kColdStreamBytes < (uint64_t{1} << 20) && (uint64_t{1} << 20) < conflux::exec::kStreamMessageBytes);
  struct Case {
    Algo algo;
    uint64_t count;
    bool streamsWhenCold;
  };
  const Case cases[] = {{Algo::TwoShot, kColdStreamBytes / 4 + 7, true},
                        {Algo::OneShot, kColdStreamBytes / 4 + 7, false},
                        {Algo::Direct, (uint64_t{1} << 20) / 4 + 7, true}};
  for (const Case& c : cases) {
    for (int n : {2, 3}) {
      for (bool cold : {true, false}) {
        const std::vector<int> nodeOf(size_t(n), 0);
        Cluster cluster(shape(nodeOf, 13));
        std::vector<uint64_t> streamed;
        const std::string what =
            describe(c.algo, Collective::AllReduce, nodeOf, c.count, 13) + (cold ? " cold" : " warm");
        checkCollective(cluster, c.algo, Collective::AllReduce, c.count, what, cold, &streamed);
        if (HasFatalFailure()) return;
        uint64_t total = 0;
        for (int r = 0; r < n; ++r) {
          total += streamed[size_t(r)];
          if (c.algo == Algo::TwoShot) {
            EXPECT_EQ(streamed[size_t(r)], cold ? c.count * 4 : 0) << what << ": rank " << r << "'s recv";
          }
        }
        // Every rank's recv once, when cold; direct streams into peers' buffers from 1 MiB anyway.
        uint64_t copies = cold && c.streamsWhenCold ? uint64_t(n) : 0;
        if (c.algo == Algo::Direct && !cold) copies = uint64_t(n) - 1;
        EXPECT_EQ(total, copies * c.count * 4) << what << ": bytes streamed by all ranks";
      }
    }
  }
}

TEST(ExecutorOverFakeLocalGroup, PlansAcrossNodesMixLocalStreamsAndMessages) {
  const std::vector<std::vector<int>> layouts = {{0, 0, 1, 1}, {0, 0, 1, 1, 2, 2}, {0, 1, 1}, {0, 1, 0, 1}};
  int runs = 0, hierRuns = 0;
  uint32_t seed = 500;
  for (const std::vector<int>& nodeOf : layouts) {
    const int n = int(nodeOf.size());
    for (Collective c : kCollectives) {
      for (Algo a : algosFor(c)) {
        if (algoUsesStaging(a) || algoUsesPeerBuffers(a) || !algoSupports(a, c, n)) continue;
        Cluster cluster(shape(nodeOf, seed));
        PlanParams probe = paramsFor(cluster, c, 1037, 0, 0);
        try {
          (void)buildPlan(a, probe);
        } catch (const Error&) {
          continue;  // a hierarchical plan that needs another layout (uniform nodes)
        }
        checkCollective(cluster, a, c, 1037, describe(a, c, nodeOf, 1037, seed));
        ++seed;
        ++runs;
        if (hierarchical(a)) ++hierRuns;
        if (HasFatalFailure()) return;
      }
    }
  }
  EXPECT_GE(runs, 40);
  EXPECT_GE(hierRuns, 6) << "the hierarchical plans ran across nodes";
}

// The dataflow executor runs operations up to CONFLUX_EXEC_WINDOW rounds ahead of the oldest unfinished
// one: hierarchical all-reduces of many segments (pipelined one round apart, several in flight in every
// phase) give the right sums in place and out of place with every window, from round by round to the
// whole plan at once, with short writes and stalls on the node and delays on the network.
TEST(ExecutorOverFakeLocalGroup, HierarchicalPlansOfManySegmentsRunAheadCorrectly) {
  const std::vector<std::vector<int>> layouts = {{0, 0, 1, 1, 2, 2}, {0, 0, 0, 1, 1, 1}};
  uint32_t seed = 900;
  int runs = 0;
  for (const std::vector<int>& nodeOf : layouts) {
    for (Algo a : {Algo::Hierarchical, Algo::HierarchicalRhd, Algo::HierarchicalDbtree}) {
      for (int window : {1, 3, 4096}) {
        for (bool inPlace : {false, true}) {
          Cluster cluster(shape(nodeOf, seed));
          for (int r = 0; r < cluster.nranks(); ++r) cluster.rank(r).env.windowRounds = window;
          const uint64_t count = 8001;  // 11 to 16 segments of 1 KiB chunks per local rank
          checkCollective(cluster, a, Collective::AllReduce, count,
                          describe(a, Collective::AllReduce, nodeOf, count, seed) + ", window " + std::to_string(window) +
                              (inPlace ? ", in place" : ""),
                          false, nullptr, inPlace);
          ++seed;
          ++runs;
          if (HasFatalFailure()) return;
        }
      }
    }
  }
  EXPECT_EQ(runs, 36);
}

// Recursive halving-doubling of radix 3 and 4 (several peers per step, their pieces received into scratch
// and reduced in the same round): flat over the nodes' network and the local streams, and between nodes
// in hier_rhd, round by round and running ahead, in place and out of place, with short writes and stalls.
TEST(ExecutorOverFakeLocalGroup, LargerRadixRhdAcrossNodes) {
  const std::vector<std::vector<int>> layouts = {{0, 1, 2, 3}, {0, 0, 1, 1, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8}};
  uint32_t seed = 1100;
  int runs = 0;
  for (const std::vector<int>& nodeOf : layouts) {
    for (int radix : {3, 4}) {
      for (int window : {1, 64}) {
        ClusterShape sh = shape(nodeOf, seed);
        sh.radix = radix;
        const std::string how = ", radix " + std::to_string(radix) + ", window " + std::to_string(window);
        for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather}) {
          Cluster cluster(sh);
          for (int r = 0; r < cluster.nranks(); ++r) cluster.rank(r).env.windowRounds = window;
          checkCollective(cluster, Algo::RecHalvingDoubling, c, 1037,
                          describe(Algo::RecHalvingDoubling, c, nodeOf, 1037, seed) + how);
          ++runs;
          if (HasFatalFailure()) return;
        }
        for (bool inPlace : {false, true}) {
          Cluster cluster(sh);
          for (int r = 0; r < cluster.nranks(); ++r) cluster.rank(r).env.windowRounds = window;
          checkCollective(cluster, Algo::HierarchicalRhd, Collective::AllReduce, 8001,
                          describe(Algo::HierarchicalRhd, Collective::AllReduce, nodeOf, 8001, seed) + how +
                              (inPlace ? ", in place" : ""),
                          false, nullptr, inPlace);
          ++runs;
          if (HasFatalFailure()) return;
        }
        ++seed;
      }
    }
  }
  EXPECT_EQ(runs, 60);
}

// PreMulSum across nodes: every message to another node straight from a rank's own input is scaled into
// bounce memory first, which it shares with the RecvReduces in each round's block of the ring. With 64
// messages' worth of rounds open, and with one, every element is the sum of each rank's input times its
// scalar (r + 1, exact in float).
TEST(ExecutorOverFakeLocalGroup, PreMulSumAcrossNodesScalesEachInputOnceWhateverTheWindow) {
  const std::vector<int> nodeOf = {0, 0, 1, 1, 2, 2};
  const int n = int(nodeOf.size());
  const uint64_t count = 6007;
  uint32_t seed = 1300;
  for (Algo a : {Algo::Ring, Algo::RecHalvingDoubling, Algo::Hierarchical, Algo::HierarchicalRhd}) {
    for (int window : {1, 64}) {
      Cluster cluster(shape(nodeOf, seed++));
      std::vector<std::vector<float>> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
      auto status = cluster.run([&](int r, RankEnv& rank) -> Status {
        rank.env.windowRounds = window;
        in[size_t(r)].resize(count);
        for (uint64_t i = 0; i < count; ++i) in[size_t(r)][i] = input(r, i);
        out[size_t(r)].assign(count, -1.0f);
        const Plan plan = buildPlan(a, paramsFor(cluster, Collective::AllReduce, count, r, 0));
        std::vector<std::byte> scratch(plan.scratchBytes);
        ExecBuffers bufs;
        bufs.send = reinterpret_cast<const std::byte*>(in[size_t(r)].data());
        bufs.recv = reinterpret_cast<std::byte*>(out[size_t(r)].data());
        bufs.scratch = scratch.data();
        const float scalar = float(r + 1);
        ExecCall call;
        call.op = RedOp::PreMulSum;
        call.scalar = &scalar;
        call.count = count;
        call.seq = 1;
        return execute(plan, bufs, call, rank.env, rank.work);
      });
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(status[size_t(r)].isOk()) << algoName(a) << " window " << window << ": rank " << r << ": "
                                              << status[size_t(r)].message();
        for (uint64_t i = 0; i < count; ++i) {
          float want = 0;
          for (int q = 0; q < n; ++q) want += float(q + 1) * input(q, i);
          ASSERT_EQ(out[size_t(r)][i], want) << algoName(a) << " window " << window << ": rank " << r << " element " << i;
        }
      }
    }
  }
}

// Running ahead over a network with latency and finite bandwidth (4 ms per message, 128 bytes per ms per
// rank's link; the fake transport, fake_transport.h): hier_rhd of 16 segments on 4 nodes of 2 ranks is
// right with a window of 1 and of 16 rounds, and both times are printed (a measurement, not a target:
// here window 16 took about 0.9x the time of window 1, as the cost model's dataflow formula expects when
// a round's latency and bytes are of one size; with latency alone it gains nothing).
TEST(ExecutorOverFakeLocalGroup, RunningAheadOverALinkWithLatencyAndBandwidth) {
  const std::vector<int> nodeOf = {0, 0, 1, 1, 2, 2, 3, 3};
  double ms[2] = {0, 0};
  const int windows[2] = {1, 16};
  for (int k = 0; k < 2; ++k) {
    ClusterShape sh;
    sh.nodeOf = nodeOf;
    sh.net = Faults{11, 0, -1, 0, 4, true, 128};
    sh.streamBytes = 1 << 16;
    Cluster cluster(sh);
    for (int r = 0; r < cluster.nranks(); ++r) cluster.rank(r).env.windowRounds = windows[k];
    const auto start = std::chrono::steady_clock::now();
    checkCollective(cluster, Algo::HierarchicalRhd, Collective::AllReduce, 8192,
                    "hier_rhd, 16 segments, window " + std::to_string(windows[k]));
    ms[k] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (HasFatalFailure()) return;
  }
  std::printf("hier_rhd on 4 nodes x 2 ranks, 4 ms and 128 bytes/ms per link: window 1 %.1f ms, window 16 %.1f ms\n",
              ms[0], ms[1]);
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A slow but alive link between two nodes of two: every message takes three timeouts, its bytes moving
// all along. The ranks that wait on the network see progress; their node-mates, which wait at barriers
// or for local streams behind them, must not time out either. Every hierarchical plan completes, right.
TEST(ExecutorOverFakeLocalGroup, ASlowLinkBetweenNodesIsNotATimeoutForAnyMember) {
  constexpr int kTimeoutMs = 150;
  const std::vector<int> nodeOf = {0, 0, 1, 1};
  int runs = 0;
  for (Algo a : {Algo::Hierarchical, Algo::HierarchicalRhd, Algo::HierarchicalDbtree}) {
    ClusterShape s = shape(nodeOf, 900 + uint32_t(runs), kTimeoutMs);
    s.net.deliveryMs = 3 * kTimeoutMs;
    Cluster cluster(s);
    const auto start = std::chrono::steady_clock::now();
    checkCollective(cluster, a, Collective::AllReduce, 61, describe(a, Collective::AllReduce, nodeOf, 61, 0) + ", slow link");
    if (HasFatalFailure()) return;
    EXPECT_GE(secondsSince(start), 3 * kTimeoutMs / 1000.0) << "a message took longer than the timeout, else this proves nothing";
    ++runs;
  }
}

// The same slow link, and ranks with nothing on the network: in a ring over nodes of 3 and 1, ranks 1 and 2
// only talk to node-mates, and wait behind rank 0, which waits for the slow messages from rank 3. They
// see rank 0's progress published on their node (rank 2 through rank 1, a chain of two) and complete.
TEST(ExecutorOverFakeLocalGroup, RanksWaitingBehindASlowLinkOnTheirNodeDoNotTimeOut) {
  constexpr int kTimeoutMs = 150;
  const std::vector<int> nodeOf = {0, 0, 0, 1};
  ClusterShape s = shape(nodeOf, 950, kTimeoutMs);
  s.net.deliveryMs = 3 * kTimeoutMs;
  Cluster cluster(s);
  const auto start = std::chrono::steady_clock::now();
  checkCollective(cluster, Algo::Ring, Collective::AllReduce, 61, describe(Algo::Ring, Collective::AllReduce, nodeOf, 61, 950) + ", slow link");
  if (HasFatalFailure()) return;
  EXPECT_GE(secondsSince(start), 3 * kTimeoutMs / 1000.0) << "a message took longer than the timeout, else this proves nothing";
}

// Rank 2 of a node of four "exits" before the call: the ranks that wait for it, directly or through the
// ring, all fail naming it, long before their 20 s timeout.
TEST(ExecutorOverFakeLocalGroup, AMemberThatExitsIsAnErrorNamingItOnEveryOther) {
  Cluster cluster(shape({0, 0, 0, 0}, 3));
  cluster.node(0).kill(2);
  const auto start = std::chrono::steady_clock::now();
  auto status = cluster.run([&](int r, RankEnv& rank) -> Status {
    if (r == 2) return Status::ok();
    return ringAllReduce(cluster, r, rank);
  });
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(status[size_t(r)].code(), Code::RemoteError) << "rank " << r << ": " << status[size_t(r)].message();
    EXPECT_NE(status[size_t(r)].message().find("rank 2 exited"), std::string::npos)
        << "rank " << r << ": " << status[size_t(r)].message();
  }
  EXPECT_LT(secondsSince(start), 5.0);
}

// Rank 1 never makes call #1 but stays busy and publishes progress every 10 ms for 1.2 s. Published for
// another call (7), it says nothing of call #1: rank 0, waiting for rank 1, times out after its 300 ms.
// Published for call #1 itself, rank 0 takes it over (a chain behind a slow link) and times out only once
// it stops.
TEST(ExecutorOverFakeLocalGroup, ProgressIsTakenOverOnlyFromTheSameCall) {
  constexpr int kTimeoutMs = 300;
  for (uint64_t publishedCall : {uint64_t{7}, uint64_t{1}}) {
    Cluster cluster(shape({0, 0}, 12, kTimeoutMs));
    const auto start = std::chrono::steady_clock::now();
    double failedAfter = 0;
    auto status = cluster.run([&](int r, RankEnv& rank) -> Status {
      if (r == 1) {
        while (secondsSince(start) < 1.2) {
          const auto now = std::chrono::steady_clock::now().time_since_epoch();
          rank.group->publishProgress(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(), publishedCall, 0);
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return Status::ok();
      }
      const Status s = ringAllReduce(cluster, r, rank);
      failedAfter = secondsSince(start);
      return s;
    });
    EXPECT_EQ(status[0].code(), Code::Timeout) << "call " << publishedCall << ": " << status[0].message();
    if (publishedCall == 7) {
      EXPECT_LT(failedAfter, 1.0) << "progress in another call was taken for this one's";
    } else {
      EXPECT_GE(failedAfter, 1.2) << "progress in this call was not taken over";
    }
  }
}

// Nodes {0, 2} and {1, 3}, a ring 0 -> 1 -> 2 -> 3 -> 0: every message crosses nodes. Rank 2 "exits"
// before the call. Rank 0 waits only for rank 3 (which waits for rank 2 on the other node and cannot see
// it), yet fails at once naming rank 2: its node-mate exited without completing the call.
TEST(ExecutorOverFakeLocalGroup, ANodeMateThatExitsMidCallIsAnErrorForRanksWaitingElsewhere) {
  constexpr int kTimeoutMs = 2000;
  Cluster cluster(shape({0, 1, 0, 1}, 6, kTimeoutMs));
  cluster.node(0).kill(1);  // rank 2, node 0's second member
  const auto start = std::chrono::steady_clock::now();
  auto status = cluster.run([&](int r, RankEnv& rank) -> Status {
    if (r == 2) return Status::ok();
    const Status s = ringAllReduce(cluster, r, rank);
    if (r == 0) {
      EXPECT_LT(secondsSince(start), kTimeoutMs / 2000.0) << "rank 0 failed at once, not at its timeout";
    }
    return s;
  });
  EXPECT_EQ(status[0].code(), Code::RemoteError) << status[0].message();
  EXPECT_NE(status[0].message().find("rank 2 exited during call #1 without completing it"), std::string::npos)
      << status[0].message();
  EXPECT_NE(status[0].message().find("receiving"), std::string::npos) << "and says where it was: " << status[0].message();
  for (int r : {1, 3}) EXPECT_FALSE(status[size_t(r)].isOk()) << "rank " << r;
}

// Rank 1 never makes the call and stays alive: a rank that waits on it (rank 0, whose stream to it fills,
// or rank 2, which receives from it) times out naming it; the others fail with that rank's report. Rank 3
// has a longer timeout: its own last progress comes microseconds after rank 0's, so with the same timeout
// it could time out first, naming the neighbour it waits for.
TEST(ExecutorOverFakeLocalGroup, AMemberThatNeverArrivesTimesOutNamingIt) {
  constexpr int kTimeoutMs = 500;
  Cluster cluster(shape({0, 0, 0, 0}, 4, kTimeoutMs));
  cluster.rank(3).env.timeoutMs = 10 * kTimeoutMs;
  const auto start = std::chrono::steady_clock::now();
  auto status = cluster.run([&](int r, RankEnv& rank) -> Status {
    if (r == 1) return Status::ok();
    return ringAllReduce(cluster, r, rank);
  });
  int timedOut = 0;
  for (int r : {0, 2, 3}) {
    const Status& s = status[size_t(r)];
    ASSERT_FALSE(s.isOk()) << "rank " << r << " finished without rank 1's data";
    if (s.code() == Code::Timeout) {
      ++timedOut;
      EXPECT_NE(s.message().find(" rank 1 ("), std::string::npos) << "rank " << r << ": " << s.message();
    } else {
      EXPECT_NE(s.message().find("reported: no progress"), std::string::npos) << "rank " << r << ": " << s.message();
      EXPECT_NE(s.message().find(" rank 1 ("), std::string::npos) << "rank " << r << ": " << s.message();
    }
  }
  EXPECT_GE(timedOut, 1);
  EXPECT_LT(secondsSince(start), 5.0) << "within the timeout (" << kTimeoutMs << " ms) and a margin";
}

// Rank 2 passes another count: its peers catch the mismatch through the call descriptors and every rank
// fails with the field's name instead of running two different plans into a hang.
TEST(ExecutorOverFakeLocalGroup, MembersThatDisagreeOnTheCountFailNamingIt) {
  Cluster cluster(shape({0, 0, 0}, 5, 10000));
  const auto start = std::chrono::steady_clock::now();
  auto status = cluster.run([&](int r, RankEnv& rank) -> Status {
    return ringAllReduce(cluster, r, rank, r == 2 ? 4104 : 4096);
  });
  int named = 0;
  for (int r = 0; r < 3; ++r) {
    const Status& s = status[size_t(r)];
    ASSERT_FALSE(s.isOk()) << "rank " << r;
    if (s.message().find("ranks disagree on call #1: count") != std::string::npos) ++named;
  }
  EXPECT_GE(named, 1) << status[0].message() << " | " << status[1].message() << " | " << status[2].message();
  EXPECT_LT(secondsSince(start), 5.0) << "caught by the argument checks, not the 10 s timeout";
}

// The fake refuses what the shared-memory group refuses, so a plan naming a bad member fails here too.
TEST(FakeLocalGroup, RejectsAChannelToItselfAndMembersOutOfRange) {
  fakegroup::FakeNode node(3, 4096, 1024, GroupFaults{});
  auto group = node.member(1);
  EXPECT_THROW(group->sendTo(1), Error);
  EXPECT_THROW(group->recvFrom(1), Error);
  EXPECT_THROW(group->sendTo(3), Error);
  EXPECT_THROW(group->recvFrom(-1), Error);
  EXPECT_THROW(group->staging(3, 0), Error);
  EXPECT_NO_THROW(group->sendTo(2));
  EXPECT_NO_THROW(group->staging(1, 0));
}

}  // namespace

// The executor tells the group of a barrier it waited at (LocalGroup::noteBarrierSeen, which times the
// cores' distance) once, after the barrier completed: each member's noted generations rise strictly and
// are barriers it arrived at. Over 20 two-shot all-reduces of many chunks (some 80 barriers per member)
// at least one member waited somewhere.
TEST(ExecutorOverFakeLocalGroup, BarrierWaitsAreNotedOnceEach) {
  const std::vector<int> nodeOf{0, 0};
  ClusterShape sh = shape(nodeOf, 5);
  sh.stagingBytes = 4096;  // two-shot chunks of 4 KiB: many barriers per call
  Cluster cluster(sh);
  for (int call = 0; call < 20; ++call) {
    checkCollective(cluster, Algo::TwoShot, Collective::AllReduce, 8191, "two-shot, call " + std::to_string(call));
    if (HasFatalFailure()) return;
  }
  size_t noted = 0;
  for (int m = 0; m < 2; ++m) {
    const std::vector<uint64_t>& seen = cluster.node(0).barriersSeen(m);
    noted += seen.size();
    for (size_t i = 0; i < seen.size(); ++i) {
      EXPECT_GE(seen[i], 1u) << "member " << m;
      EXPECT_LE(seen[i], cluster.node(0).arrivals(m)) << "member " << m << " noted a barrier it never arrived at";
      if (i > 0) {
        EXPECT_GT(seen[i], seen[i - 1]) << "member " << m << " noted barrier " << seen[i] << " twice or out of order";
      }
    }
  }
  EXPECT_GT(cluster.node(0).arrivals(0), 40u);
  EXPECT_GT(noted, 0u) << "no member waited at any of the barriers";
}

// CONFLUX_SHM_STREAM_STAGING as the policy: auto by default, the boolean spellings, and anything else
// refused naming the variable and the value as given.
TEST(ExecutorOverFakeLocalGroup, StreamStagingSettingParses) {
  using Policy = conflux::ExecEnv::StreamStaging;
  unsetenv("CONFLUX_SHM_STREAM_STAGING");
  EXPECT_EQ(conflux::streamStagingFromConfig(), Policy::WhenFar);
  const std::pair<const char*, Policy> good[] = {{"auto", Policy::WhenFar}, {"AUTO", Policy::WhenFar},
                                                 {"1", Policy::Always},     {"true", Policy::Always},
                                                 {"On", Policy::Always},    {"0", Policy::Never},
                                                 {"no", Policy::Never},     {"OFF", Policy::Never}};
  for (const auto& [value, policy] : good) {
    setenv("CONFLUX_SHM_STREAM_STAGING", value, 1);
    EXPECT_EQ(conflux::streamStagingFromConfig(), policy) << value;
  }
  for (const char* bad : {"2", "sometimes", " 1"}) {
    setenv("CONFLUX_SHM_STREAM_STAGING", bad, 1);
    try {
      conflux::streamStagingFromConfig();
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const conflux::Error& e) {
      EXPECT_EQ(e.code(), conflux::Code::InvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find(std::string("CONFLUX_SHM_STREAM_STAGING='") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
  unsetenv("CONFLUX_SHM_STREAM_STAGING");
}
