// The executor in one process: a simulated cluster whose ranks are threads, each node's ranks joined by a
// fake local group (fake_local_group.h) and the nodes by the fake message transport (fake_transport.h),
// with each rank's links made by linkPeers from the choice its node layout implies (choiceFromLocalIndex:
// members of its node local, the others over the network). checkCollective runs one
// algorithm's plans for a collective on every rank and compares every output with a reference computed
// here (small integers, so every float sum is exact).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithms.h"
#include "fake_local_group.h"
#include "fake_transport.h"
#include "src/executor.h"
#include "src/peer_links.h"

namespace executortest {

using namespace conflux;
using faketransport::FakeFabric;
using faketransport::Faults;
using fakegroup::FakeNode;
using fakegroup::GroupFaults;

/// One rank's executor environment.
struct RankEnv {
  std::unique_ptr<transport::LocalGroup> group;
  std::unique_ptr<transport::MessageTransport> net;
  ExecEnv env;
  ExecWorkspace work;
};

struct ClusterShape {
  std::vector<int> nodeOf;        ///< node of each rank (nodes numbered 0..)
  Faults net;                     ///< the message transport's delays and failure
  GroupFaults group;              ///< every node's short writes and stalls
  int timeoutMs = 20000;
  size_t streamBytes = 256;       ///< each local stream's buffer: small, so messages wrap it often
  size_t stagingBytes = 1 << 16;  ///< each member's staging half
  int radix = 2;                  ///< PlanParams::radix of the plans paramsFor builds
};

class Cluster {
 public:
  explicit Cluster(const ClusterShape& shape)
      : fabric_(int(shape.nodeOf.size()), shape.net), stagingBytes_(shape.stagingBytes), radix_(shape.radix) {
    const int nranks = int(shape.nodeOf.size());
    layout_ = std::make_shared<const NodeLayout>(NodeLayout::fromNodeOf(shape.nodeOf));
    for (const std::vector<int>& members : layout_->nodes) {
      GroupFaults f = shape.group;
      f.seed += uint32_t(nodes_.size()) * 101u;
      nodes_.push_back(std::make_unique<FakeNode>(int(members.size()), shape.streamBytes, shape.stagingBytes, f));
    }
    for (int r = 0; r < nranks; ++r) {
      auto rank = std::make_unique<RankEnv>();
      const int node = nodeIndexOf(r);
      const std::vector<int>& members = layout_->nodes[size_t(node)];
      const int me = int(std::find(members.begin(), members.end(), r) - members.begin());
      rank->group = nodes_[size_t(node)]->member(me);
      ExecEnv& env = rank->env;
      env.local = rank->group.get();
      env.rank = r;
      env.nranks = nranks;
      env.localIndex.assign(size_t(nranks), -1);
      for (size_t l = 0; l < members.size(); ++l) env.localIndex[size_t(members[l])] = int(l);
      env.globalOfLocal = members;
      env.timeoutMs = shape.timeoutMs;
      if (layout_->nodes.size() > 1) {
        rank->net = fabric_.endpoint(r);
        env.net = rank->net.get();
      }
      linkPeers(env, choiceFromLocalIndex(env.localIndex));  // what selectTransports gives these hosts
      ranks_.push_back(std::move(rank));
    }
  }

  int nranks() const { return int(ranks_.size()); }
  uint64_t stagingBytes() const { return stagingBytes_; }
  int radix() const { return radix_; }
  RankEnv& rank(int r) { return *ranks_[size_t(r)]; }
  bool multiNode() const { return layout_->nodes.size() > 1; }
  const std::shared_ptr<const NodeLayout>& layout() const { return layout_; }
  FakeFabric& fabric() { return fabric_; }
  FakeNode& node(int n) { return *nodes_[size_t(n)]; }
  int nodeIndexOf(int r) const {
    for (size_t n = 0; n < layout_->nodes.size(); ++n) {
      for (int m : layout_->nodes[n]) {
        if (m == r) return int(n);
      }
    }
    return -1;
  }

  /// Runs body(rank, env) on one thread per rank; each rank's status.
  std::vector<Status> run(const std::function<Status(int, RankEnv&)>& body) {
    std::vector<Status> out(ranks_.size());
    std::vector<std::thread> threads;
    for (int r = 0; r < nranks(); ++r) threads.emplace_back([&, r] { out[size_t(r)] = body(r, *ranks_[size_t(r)]); });
    for (auto& t : threads) t.join();
    return out;
  }

 private:
  FakeFabric fabric_;
  const uint64_t stagingBytes_;
  const int radix_;
  std::shared_ptr<const NodeLayout> layout_;
  std::vector<std::unique_ptr<FakeNode>> nodes_;
  std::vector<std::unique_ptr<RankEnv>> ranks_;
};

/// Rank r's input element i (small integers: every sum is exact in float).
inline float input(int r, uint64_t i) { return float((r * 7 + int(i % 13)) % 10); }

/// What rank `r` must hold after the collective, element i of its receive buffer.
inline float expected(Collective c, int nranks, int root, uint64_t count, int r, uint64_t i) {
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

/// Rank r's plan parameters for a float32 sum of `c` (root: the last rank), pipelined in small chunks.
inline PlanParams paramsFor(const Cluster& cluster, Collective c, uint64_t count, int r, uint64_t stagingBytes) {
  PlanParams p;
  p.coll = c;
  p.nranks = cluster.nranks();
  p.rank = r;
  p.count = count;
  p.root = cluster.nranks() - 1;
  p.chunkBytes = 1024;  // several pipeline steps even at these counts
  p.stagingBytes = stagingBytes;
  p.radix = cluster.radix();
  if (cluster.multiNode()) p.layout = cluster.layout();
  return p;
}

/// "ring allreduce on <where>, count N, seed S": names one checked run in failure messages.
inline std::string describeRun(Algo a, Collective c, const std::string& where, uint64_t count, uint32_t seed) {
  return std::string(algoName(a)) + " " + std::string(collectiveName(c)) + " on " + where + ", count " +
         std::to_string(count) + ", seed " + std::to_string(seed);
}

/// A ring all-reduce of `data` in place on rank r, as the communicator's first call. The caller keeps
/// `data`: a test whose ranks fail at different times must keep their buffers until the cluster is gone,
/// since a late peer's message may still land in them.
inline Status ringAllReduce(Cluster& cluster, int r, RankEnv& rank, std::vector<float>& data) {
  const uint64_t count = data.size();
  ExecBuffers bufs;
  bufs.send = reinterpret_cast<const std::byte*>(data.data());
  bufs.recv = reinterpret_cast<std::byte*>(data.data());
  ExecCall call;
  call.count = count;
  call.seq = 1;
  return execute(buildPlan(Algo::Ring, paramsFor(cluster, Collective::AllReduce, count, r, 0)), bufs, call,
                 rank.env, rank.work);
}

/// The same over `count` floats (all 1) of its own.
inline Status ringAllReduce(Cluster& cluster, int r, RankEnv& rank, uint64_t count = 4096) {
  std::vector<float> data(count, 1.0f);
  return ringAllReduce(cluster, r, rank, data);
}

/// Runs `algo`'s plans for `c` on every rank of `cluster` as the communicator's first collective (with
/// every rank's buffers mapped by every other, as the direct plans need) and checks every output.
/// recvCold: the call says its receive buffers are cold (ExecCall::recvCold), so copies into them stream;
/// `streamed` (when given) gets each rank's ExecWorkspace::streamedBytes of the call.
/// inPlace (all-reduce only): the receive buffer holds the input and is passed as both buffers.
inline void checkCollective(Cluster& cluster, Algo algo, Collective c, uint64_t count, const std::string& what,
                            bool recvCold = false, std::vector<uint64_t>* streamed = nullptr, bool inPlace = false) {
  const int n = cluster.nranks();
  const size_t ranks = static_cast<size_t>(n);
  std::vector<std::vector<float>> sends(ranks), recvs(ranks);
  std::vector<const std::byte*> peerSend(ranks);
  std::vector<std::byte*> peerRecv(ranks);
  const uint64_t staging = cluster.stagingBytes();
  if (streamed != nullptr) streamed->assign(ranks, 0);
  for (int r = 0; r < n; ++r) {
    const BufferSizes sizes = bufferSizes(paramsFor(cluster, c, count, r, staging));
    sends[size_t(r)].resize(sizes.send / 4);
    for (size_t i = 0; i < sends[size_t(r)].size(); ++i) sends[size_t(r)][i] = input(r, i);
    recvs[size_t(r)].assign(sizes.recv / 4, -1.0f);
    if (inPlace) recvs[size_t(r)] = sends[size_t(r)];
    peerSend[size_t(r)] = reinterpret_cast<const std::byte*>((inPlace ? recvs : sends)[size_t(r)].data());
    peerRecv[size_t(r)] = reinterpret_cast<std::byte*>(recvs[size_t(r)].data());
  }
  auto status = cluster.run([&](int r, RankEnv& rank) -> Status {
    const Plan plan = buildPlan(algo, paramsFor(cluster, c, count, r, staging));
    std::vector<std::byte> scratch(plan.scratchBytes);
    ExecBuffers bufs;
    bufs.send = peerSend[size_t(r)];
    bufs.recv = peerRecv[size_t(r)];
    bufs.scratch = scratch.data();
    bufs.peerSend = peerSend.data();
    bufs.peerRecv = peerRecv.data();
    ExecCall call;
    call.coll = c;
    call.count = count;
    call.root = n - 1;
    call.seq = 1;
    call.recvCold = recvCold;
    const uint64_t before = rank.work.streamedBytes;
    Status s = execute(plan, bufs, call, rank.env, rank.work);
    if (streamed != nullptr) (*streamed)[size_t(r)] = rank.work.streamedBytes - before;
    return s;
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(status[size_t(r)].isOk()) << what << ": rank " << r << ": " << status[size_t(r)].message();
    if (c == Collective::Reduce && r != n - 1) continue;
    const std::vector<float>& got = recvs[size_t(r)];
    for (uint64_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], expected(c, n, n - 1, count, r, i)) << what << ": rank " << r << " element " << i;
    }
  }
  EXPECT_EQ(cluster.fabric().unmatched(), 0u) << what << ": messages left over";
}

}  // namespace executortest
