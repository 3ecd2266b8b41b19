#include "algorithms/plan.h"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace conflux {

std::string_view bufKindName(BufKind k) {
  switch (k) {
    case BufKind::Send: return "send";
    case BufKind::Recv: return "recv";
    case BufKind::Scratch: return "scratch";
    case BufKind::Staging: return "staging";
  }
  return "unknown";
}

std::string_view opKindName(OpKind k) {
  switch (k) {
    case OpKind::Send: return "Send";
    case OpKind::Recv: return "Recv";
    case OpKind::RecvReduce: return "RecvReduce";
    case OpKind::Barrier: return "Barrier";
    case OpKind::Copy: return "Copy";
    case OpKind::Reduce: return "Reduce";
    case OpKind::Finalize: return "Finalize";
    case OpKind::ReduceSpread: return "ReduceSpread";
  }
  return "unknown";
}

BufferSizes bufferSizes(const PlanParams& p) {
  const uint64_t block = p.count * p.eltSize;
  const uint64_t n = p.nranks > 0 ? static_cast<uint64_t>(p.nranks) : 0;
  switch (p.coll) {
    case Collective::AllReduce:
    case Collective::Reduce:
    case Collective::Broadcast:
    case Collective::SendRecv:
      return {block, block};
    case Collective::AllGather:
      return {block, block * n};
    case Collective::ReduceScatter:
      return {block * n, block};
    case Collective::AllToAll:
      return {block * n, block * n};
  }
  return {};
}

void PlanBuilder::nextRound() {
  const auto end = static_cast<uint32_t>(plan_.ops.size());
  if (end > roundStart_) {
    plan_.rounds.push_back({roundStart_, end - roundStart_});
  }
  roundStart_ = end;
}

void PlanBuilder::add(const Op& op) { plan_.ops.push_back(op); }

void PlanBuilder::send(int peer, BufRef src, uint64_t bytes) {
  if (bytes == 0) return;
  Op op;
  op.kind = OpKind::Send;
  op.peer = peer;
  op.firstSrc = static_cast<uint32_t>(plan_.sources.size());
  op.nsrc = 1;
  op.bytes = bytes;
  plan_.sources.push_back(src);
  add(op);
}

void PlanBuilder::recv(int peer, BufRef dst, uint64_t bytes) {
  if (bytes == 0) return;
  Op op;
  op.kind = OpKind::Recv;
  op.peer = peer;
  op.dst = dst;
  op.bytes = bytes;
  add(op);
}

void PlanBuilder::recvReduce(int peer, BufRef dst, BufRef src, uint64_t bytes) {
  if (bytes == 0) return;
  Op op;
  op.kind = OpKind::RecvReduce;
  op.peer = peer;
  op.firstSrc = static_cast<uint32_t>(plan_.sources.size());
  op.nsrc = 1;
  op.dst = dst;
  op.bytes = bytes;
  plan_.sources.push_back(src);
  add(op);
}

void PlanBuilder::barrier() {
  Op op;
  op.kind = OpKind::Barrier;
  add(op);
}

void PlanBuilder::copy(BufRef dst, BufRef src, uint64_t bytes) {
  if (bytes == 0) return;
  Op op;
  op.kind = OpKind::Copy;
  op.firstSrc = static_cast<uint32_t>(plan_.sources.size());
  op.nsrc = 1;
  op.dst = dst;
  op.bytes = bytes;
  plan_.sources.push_back(src);
  add(op);
}

void PlanBuilder::reduce(BufRef dst, const std::vector<BufRef>& srcs, uint64_t bytes) {
  if (bytes == 0 || srcs.empty()) return;
  Op op;
  op.kind = OpKind::Reduce;
  op.firstSrc = static_cast<uint32_t>(plan_.sources.size());
  op.nsrc = static_cast<uint32_t>(srcs.size());
  op.dst = dst;
  op.bytes = bytes;
  plan_.sources.insert(plan_.sources.end(), srcs.begin(), srcs.end());
  add(op);
}

void PlanBuilder::finalize(BufRef dst, uint64_t bytes) {
  if (bytes == 0) return;
  Op op;
  op.kind = OpKind::Finalize;
  op.dst = dst;
  op.bytes = bytes;
  add(op);
}

void PlanBuilder::reduceSpread(BufRef dst, const std::vector<BufRef>& extra, const std::vector<BufRef>& srcs,
                               uint64_t bytes) {
  if (bytes == 0 || srcs.empty()) return;
  Op op;
  op.kind = OpKind::ReduceSpread;
  op.firstSrc = static_cast<uint32_t>(plan_.sources.size());
  op.nsrc = static_cast<uint32_t>(srcs.size());
  op.nextra = static_cast<uint32_t>(extra.size());
  op.dst = dst;
  op.bytes = bytes;
  plan_.sources.insert(plan_.sources.end(), srcs.begin(), srcs.end());
  plan_.sources.insert(plan_.sources.end(), extra.begin(), extra.end());
  add(op);
}

void PlanBuilder::needScratch(uint64_t bytes) { plan_.scratchBytes = std::max(plan_.scratchBytes, bytes); }

void PlanBuilder::needStaging(uint64_t bytes) { plan_.stagingBytes = std::max(plan_.stagingBytes, bytes); }

Plan PlanBuilder::finish() {
  nextRound();
  Plan out = std::move(plan_);
  plan_ = Plan{};
  plan_.algorithm = out.algorithm;
  roundStart_ = 0;
  return out;
}

bool NodeLayout::uniform() const {
  if (nodes.empty()) return false;
  for (const auto& n : nodes) {
    if (n.size() != nodes.front().size() || n.empty()) return false;
  }
  return true;
}

namespace {
template <class Key>
NodeLayout layoutOf(const std::vector<Key>& nodeOfRank) {
  NodeLayout l;
  std::unordered_map<Key, size_t> node;  // numbered by first appearance, so nodes are ordered by lowest rank
  for (size_t r = 0; r < nodeOfRank.size(); ++r) {
    auto [it, added] = node.try_emplace(nodeOfRank[r], l.nodes.size());
    if (added) l.nodes.emplace_back();
    l.nodes[it->second].push_back(static_cast<int>(r));
  }
  return l;
}
}  // namespace

NodeLayout NodeLayout::fromNodeOf(const std::vector<int>& nodeOfRank) { return layoutOf(nodeOfRank); }
NodeLayout NodeLayout::fromNodeOf(const std::vector<std::string>& hostOfRank) { return layoutOf(hostOfRank); }

}  // namespace conflux
