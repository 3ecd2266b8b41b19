// The executor in one process, over the fake message transport (fake_transport.h): every rank is a thread
// on a node of its own (a one-rank shared-memory world), so every message of its plan goes through the
// transport, which delays and reorders completions and can fail an operation. Each message-passing
// algorithm's plans for every collective it supports, on 2, 3 and 5 ranks and odd counts, give what a
// reference computed here says; a send/recv batch matches by order; an injected failure ends the call on
// the failing rank with the transport's message and on the others within the timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithms.h"
#include "src/executor.h"
#include "fake_transport.h"
#include "test_shm_util.h"

namespace {

using namespace conflux;
using faketransport::FakeFabric;
using faketransport::Faults;

/// One rank's executor environment: a shared-memory world of its own (no local peers) and the fabric.
struct RankEnv {
  std::unique_ptr<shm::ShmWorld> world;
  std::unique_ptr<transport::MessageTransport> net;
  ExecEnv env;
  ExecWorkspace work;
};

std::unique_ptr<RankEnv> makeRank(FakeFabric& fabric, int rank, int nranks, const std::string& dir, int timeoutMs) {
  auto r = std::make_unique<RankEnv>();
  shm::ShmConfig cfg;
  cfg.dir = dir;
  cfg.jobTag = shmtest::makeTag() + "-r" + std::to_string(rank);
  cfg.globalRanks = {rank};
  cfg.channelBytes = 4096;
  cfg.stagingBytes = 4096;
  shm::LocalExchange ex;
  ex.allGather = [](const std::vector<uint8_t>& mine) { return mine; };
  ex.barrier = [] {};
  r->world = shm::ShmWorld::create(cfg, ex);
  r->net = fabric.endpoint(rank);
  r->env.world = r->world.get();
  r->env.rank = rank;
  r->env.nranks = nranks;
  r->env.localIndex.assign(size_t(nranks), -1);
  r->env.localIndex[size_t(rank)] = 0;
  r->env.globalOfLocal = {rank};
  r->env.timeoutMs = timeoutMs;
  r->env.net = r->net.get();
  return r;
}

/// Runs body(rank, env) on `nranks` threads; returns each rank's status.
std::vector<Status> runRanks(FakeFabric& fabric, int nranks, int timeoutMs,
                             const std::function<Status(int, RankEnv&)>& body) {
  shmtest::TempDir dir;
  std::vector<std::unique_ptr<RankEnv>> ranks;
  for (int r = 0; r < nranks; ++r) ranks.push_back(makeRank(fabric, r, nranks, dir.path, timeoutMs));
  std::vector<Status> out(static_cast<size_t>(nranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back([&, r] { out[size_t(r)] = body(r, *ranks[size_t(r)]); });
  for (auto& t : threads) t.join();
  return out;
}

/// Builds `algo`'s plan for `p` (float32 sum) and runs it as the communicator's first collective.
Status runCollective(Algo algo, const PlanParams& p, const float* send, float* recv, RankEnv& rank) {
  const Plan plan = buildPlan(algo, p);
  std::vector<std::byte> scratch(plan.scratchBytes);
  ExecBuffers bufs;
  bufs.send = reinterpret_cast<const std::byte*>(send);
  bufs.recv = reinterpret_cast<std::byte*>(recv);
  bufs.scratch = scratch.data();
  ExecCall call;
  call.coll = p.coll;
  call.count = p.count;
  call.root = p.root;
  call.seq = 1;
  return execute(plan, bufs, call, rank.env, rank.work);
}

/// Rank r's input element i (small integers: every sum is exact in float).
float input(int r, uint64_t i) { return float((r * 7 + int(i % 13)) % 10); }

/// What rank `r` must hold after the collective, element i of its receive buffer.
float expected(Collective c, int nranks, int root, uint64_t count, int r, uint64_t i) {
  float sum = 0;
  switch (c) {
    case Collective::AllReduce:
    case Collective::Reduce:
      for (int q = 0; q < nranks; ++q) sum += input(q, i);
      return sum;
    case Collective::Broadcast: return input(root, i);
    case Collective::AllGather: return input(int(i / count), i % count);
    case Collective::ReduceScatter:
      for (int q = 0; q < nranks; ++q) sum += input(q, uint64_t(r) * count + i);
      return sum;
    case Collective::AllToAll: return input(int(i / count), uint64_t(r) * count + i % count);
    default: return 0;
  }
}

/// Rank p's plan of `algo` for `c`, run on every rank over a fabric with `faults`; checks every output.
void checkCollective(Algo algo, Collective c, int nranks, uint64_t count, const Faults& faults) {
  FakeFabric fabric(nranks, faults);
  const int root = nranks - 1;
  const std::string what = std::string(algoName(algo)) + " " + std::string(collectiveName(c)) + " on " +
                           std::to_string(nranks) + " ranks, count " + std::to_string(count) + ", seed " +
                           std::to_string(faults.seed);
  std::vector<std::vector<float>> recvs(static_cast<size_t>(nranks));
  auto status = runRanks(fabric, nranks, 20000, [&](int r, RankEnv& rank) -> Status {
    PlanParams p;
    p.coll = c;
    p.nranks = nranks;
    p.rank = r;
    p.count = count;
    p.root = root;
    p.chunkBytes = 1024;  // several pipeline steps even at these counts
    const BufferSizes sizes = bufferSizes(p);
    std::vector<float> send(sizes.send / 4);
    for (size_t i = 0; i < send.size(); ++i) send[i] = input(r, i);
    std::vector<float>& recv = recvs[size_t(r)];
    recv.assign(sizes.recv / 4, -1.0f);
    return runCollective(algo, p, send.data(), recv.data(), rank);
  });
  for (int r = 0; r < nranks; ++r) {
    ASSERT_TRUE(status[size_t(r)].isOk()) << what << ": rank " << r << ": " << status[size_t(r)].message();
    if (c == Collective::Reduce && r != root) continue;
    const std::vector<float>& got = recvs[size_t(r)];
    for (uint64_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], expected(c, nranks, root, count, r, i)) << what << ": rank " << r << " element " << i;
    }
  }
  EXPECT_EQ(fabric.unmatched(), 0u) << what << ": messages left over";
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
          checkCollective(a, c, n, count, Faults{seed++, 6, -1, 0});
          ++runs;
          if (HasFatalFailure()) return;
        }
      }
    }
  }
  EXPECT_GE(runs, 60) << "every message-passing algorithm ran";
}

// A send/recv batch: rank 0 sends three messages to rank 2 with one plan, rank 2 receives them with three
// plans of one receive each; they match in order whatever the delays (point-to-point tags count messages
// between the pair, not calls).
TEST(ExecutorOverFakeTransport, PointToPointMatchesInOrderAcrossBatches) {
  FakeFabric fabric(3, Faults{99, 8, -1, 0});
  std::vector<std::vector<int32_t>> got(3, std::vector<int32_t>(100, 0));
  auto status = runRanks(fabric, 3, 20000, [&](int r, RankEnv& rank) -> Status {
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
  EXPECT_EQ(fabric.unmatched(), 0u);
}

// The 3rd operation rank 1 posts fails: rank 1's call ends with the transport's error, the others (whose
// messages from rank 1 never come) with an error of their own within the timeout, never a hang.
TEST(ExecutorOverFakeTransport, AnInjectedFailureEndsTheCallOnEveryRank) {
  constexpr int kTimeoutMs = 400;
  FakeFabric fabric(4, Faults{7, 3, 1, 3});
  const auto start = std::chrono::steady_clock::now();
  auto status = runRanks(fabric, 4, kTimeoutMs, [&](int r, RankEnv& rank) -> Status {
    PlanParams p;
    p.coll = Collective::AllReduce;
    p.nranks = 4;
    p.rank = r;
    p.count = 4096;
    p.chunkBytes = 1024;
    std::vector<float> data(4096, 1.0f);
    return runCollective(Algo::Ring, p, data.data(), data.data(), rank);
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(status[1].code(), Code::RemoteError) << status[1].message();
  EXPECT_NE(status[1].message().find("injected failure of rank 1's operation 3"), std::string::npos)
      << status[1].message();
  EXPECT_NE(status[1].message().find("[during allreduce (call #1, ring"), std::string::npos)
      << "the executor says where: " << status[1].message();
  for (int r : {0, 2, 3}) EXPECT_FALSE(status[size_t(r)].isOk()) << "rank " << r << " finished without rank 1's data";
  EXPECT_LT(secs, 10.0) << "every rank ended within the timeout (" << kTimeoutMs << " ms) and a margin";
}

}  // namespace
