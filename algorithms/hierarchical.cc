// Hierarchical all-reduce: reduce-scatter inside each node, all-reduce of each shard across nodes (every
// local rank drives its own inter-node ring, over its own rail), all-gather inside each node, pipelined.
//
// Layout: N nodes of L ranks each (PlanParams::layout, uniform). Rank (node k, local index i).
// The vector is cut into segments of L * chunk elements (the last one shorter); a segment into L shards
// (Blocks{len, L}), and shard i, for the inter-node phase, into N blocks (Blocks{shardLen, N}).
//
// Schedule of one segment, in T = (L-1) + 2(N-1) + (L-1) + 1 rounds:
//   A. intra-node reduce-scatter, ring over local ranks i -> i+1 (L-1 rounds): step s sends shard
//      (i-s-1) and receive-reduces shard (i-s-2); afterwards local rank i holds shard i summed over its
//      node, in recv (step 0 sends from send; partials live in recv, as in the ring all-reduce).
//   B. inter-node all-reduce of shard i, ring over nodes k -> k+1 between the ranks with local index i
//      (2(N-1) rounds): reduce-scatter of the shard's N blocks, then all-gather.
//      With L = 1 phase A is empty and the shard's own contribution is read from send.
//   C. intra-node all-gather of the shards, ring over local ranks (L-1 rounds).
//   F. Finalize (avg) of the whole segment, in a round of its own (plan.h rule 3). Dividing the gathered
//      sums, rather than each block before the all-gather, costs n times the (cheap) divisions but needs no
//      round without an inter-node step: a Finalize round between reduce-scatter and all-gather would
//      leave the network idle once per segment.
// Pipelining: segment s starts one round after segment s-1 (D = 1), so a round carries the inter-node
// steps of up to 2(N-1) segments in flight next to the intra-node steps and Finalize of others: the
// network never idles between segments and the ring's latency is paid once per round, not once per
// segment and step (D = 2(N-1), one segment in the network at a time, measured the same on 2 nodes but
// costs 2(N-1) latencies per segment, which dominates at hundreds of nodes). Segments touch disjoint
// bytes, and both ends of every message emit it in the same round and in segment order, so rounds stay
// conflict-free and messages match in FIFO order.
//
// hier_rhd (Algo::HierarchicalRhd) runs phase B by recursive halving-doubling instead, hier_dbtree
// (Algo::HierarchicalDbtree) by the double binary tree: the plan of rec_halving_doubling.cc or
// double_binary_tree.cc for N ranks (inner rank = node index) on the shard, its peers mapped to the ranks
// of equal local index, its send/recv to the shard, its scratch to one of as many regions as phase B has
// rounds (segments take them in turn), its Finalize dropped (phase F divides). Their latency grows with
// log N rather than N (log2 N, or log_k N with CONFLUX_RHD_RADIX=k). The N inner plans are put on
// one clock first (round_alignment.cc: a folded rhd rank idles while the others halve and double; a
// dbtree leaf waits for its chunk), and phase B lasts the clock's span on every rank, so segments run
// one round apart as with the ring: a segment's log2 N latencies overlap the next segments' rounds
// instead of following them (before, phase B of segment s + 1 began when segment s's had ended, and
// 1 GiB on 1024 nodes paid segments x 2 log2 N network latencies).
//
// Layouts that are not uniform (e.g. 2 + 1 ranks) or absent fall back to the flat ring schedule, named
// "hier(ring)" (or "hier_rhd(ring)"), so the plan is correct for every communicator.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/schedule.h"
#include "core/error.h"

namespace conflux::sched {
namespace {

struct Hier {
  PlanBuilder& b;
  const NodeLayout& lay;
  int N, L, k, li;  // nodes, ranks per node, my node, my local index
  uint32_t elt;
  uint64_t segElems;
  uint64_t count;
  Algo inner = Algo::Ring;       // the inter-node all-reduce of phase B
  const PlanParams* outer = nullptr;
  /// Phase B of one shard length (inner != Ring): my plan, and where its rounds sit on the clock that
  /// aligns the plans of all N inner ranks (alignRounds), so that segments can run a round apart.
  struct InnerPhase {
    Plan mine;
    std::vector<int> roundAt;  ///< my round at each tick of the clock, -1 where I sit out
    bool aligned = false;      ///< false: no common clock; roundAt is my own round order
  };
  std::map<uint64_t, InnerPhase> innerPhases;  // by shard length
  uint64_t innerScratch = 0;                   // the most scratch one of them needs
  /// Scratch regions of phase B, used by segments in turn (segment s takes region s % scratchRegions):
  /// no more segments are in phase B at once than it has rounds, and segments that share a region are in
  /// it at different rounds (the later one waits for the earlier one's bytes, op_graph.h). A window of
  /// more rounds than phase B has (CONFLUX_EXEC_WINDOW) cannot run a segment's phase B ahead of the one
  /// whose region it reuses: that costs memory for nothing at the default window of 1.
  uint64_t scratchRegions = 1;

  int localPeer(int j) const { return lay.nodes[static_cast<size_t>(k)][static_cast<size_t>(mod(j, L))]; }
  int nodePeer(int j) const { return lay.nodes[static_cast<size_t>(mod(j, N))][static_cast<size_t>(li)]; }
  int roundsA() const { return L - 1; }
  uint64_t segments() const { return std::max<uint64_t>(1, numChunks(count, segElems)); }
  uint64_t segLen(uint64_t seg) const { return std::min(segElems, count - std::min(count, seg * segElems)); }
  uint64_t shardLen(uint64_t seg, int j) const { return Blocks{segLen(seg), static_cast<uint64_t>(L)}.len(static_cast<uint64_t>(j)); }

  static bool onlyFinalize(const Plan& plan, size_t r) {
    const Round& round = plan.rounds[r];
    for (uint32_t i = 0; i < round.numOps; ++i) {
      if (plan.ops[round.firstOp + i].kind != OpKind::Finalize) return false;
    }
    return true;
  }
  /// Phase B for a shard of `len` elements (I am inner rank k of N), built once per length: every inner
  /// rank's plan, to put them on one clock.
  const InnerPhase& innerPhase(uint64_t len) {
    auto it = innerPhases.find(len);
    if (it != innerPhases.end()) return it->second;
    PlanParams q;
    q.coll = Collective::AllReduce;
    q.nranks = N;
    q.count = len;
    q.eltSize = elt;
    q.chunkBytes = outer->chunkBytes;
    q.radix = outer->radix;
    std::vector<Plan> plans;
    for (int v = 0; v < N; ++v) {
      q.rank = v;
      plans.push_back(buildPlan(inner, q));
    }
    InnerPhase phase;
    const std::optional<RoundClock> clock = alignRounds(plans);
    phase.aligned = clock.has_value();
    if (clock) {
      // Ticks where no inner rank has more than a Finalize (dropped here) are left out.
      std::vector<int> tickAt(static_cast<size_t>(clock->span), 0);
      for (int v = 0; v < N; ++v) {
        const auto& ticks = clock->tick[static_cast<size_t>(v)];
        for (size_t r = 0; r < ticks.size(); ++r) {
          if (!onlyFinalize(plans[static_cast<size_t>(v)], r)) tickAt[static_cast<size_t>(ticks[r])] = 1;
        }
      }
      int used = 0;
      for (int& t : tickAt) t = t ? used++ : -1;
      phase.roundAt.assign(static_cast<size_t>(used), -1);
      const auto& ticks = clock->tick[static_cast<size_t>(k)];
      for (size_t r = 0; r < ticks.size(); ++r) {
        if (const int t = tickAt[static_cast<size_t>(ticks[r])]; t >= 0) phase.roundAt[static_cast<size_t>(t)] = static_cast<int>(r);
      }
    } else {
      for (size_t r = 0; r < plans[static_cast<size_t>(k)].rounds.size(); ++r) phase.roundAt.push_back(static_cast<int>(r));
    }
    phase.mine = std::move(plans[static_cast<size_t>(k)]);
    innerScratch = std::max(innerScratch, phase.mine.scratchBytes);
    return innerPhases.emplace(len, std::move(phase)).first->second;
  }
  /// Phase B rounds of a segment: the same for every local rank of the node (the longest of their
  /// phases), so that phase C starts in the same round on all of them; with aligned plans the same on
  /// every node too (the clock's span).
  int roundsB(uint64_t seg) {
    if (inner == Algo::Ring) return 2 * (N - 1);
    size_t most = 0;
    for (int j = 0; j < L; ++j) most = std::max(most, innerPhase(shardLen(seg, j)).roundAt.size());
    return static_cast<int>(most);
  }
  /// Whether every segment's phase B plans share a clock (then segments may run one round apart).
  bool phaseBAligned() {
    for (uint64_t seg : {uint64_t{0}, segments() - 1}) {  // all segments but the last have one length
      for (int j = 0; j < L; ++j) {
        if (!innerPhase(shardLen(seg, j)).aligned) return false;
      }
    }
    return true;
  }
  int roundsPerSegment(uint64_t seg) { return roundsA() + roundsB(seg) + (L - 1) + 1; }  // + the Finalize round

  /// Tick `t` of my phase B for segment `seg` (my inner round there, if any), with peers and buffers
  /// mapped: inner rank v is node v's rank with my local index; inner send/recv are my shard (in recv
  /// after phase A, or in send with one rank per node); scratch is region seg % scratchRegions. Finalize
  /// is left to phase F.
  void emitInner(uint64_t seg, int t) {
    const InnerPhase& phase = innerPhase(shardLen(seg, li));
    if (t >= static_cast<int>(phase.roundAt.size()) || phase.roundAt[static_cast<size_t>(t)] < 0) return;
    const int r = phase.roundAt[static_cast<size_t>(t)];
    const Plan& plan = phase.mine;
    const uint64_t base = (seg * segElems + Blocks{segLen(seg), static_cast<uint64_t>(L)}.off(static_cast<uint64_t>(li))) * elt;
    auto map = [&](BufRef ref) {
      switch (ref.kind) {
        case BufKind::Send: return L > 1 ? BufRef::recv(base + ref.offset) : BufRef::send(base + ref.offset);
        case BufKind::Recv: return BufRef::recv(base + ref.offset);
        case BufKind::Scratch: return BufRef::scratch((seg % scratchRegions) * innerScratchStride() + ref.offset);
        case BufKind::Staging: break;
      }
      throw Error(Code::InternalError, "hierarchical: the inner plan " + plan.algorithm + " uses staging");
    };
    auto peer = [&](int v) { return lay.nodes[static_cast<size_t>(v)][static_cast<size_t>(li)]; };
    const Round& round = plan.rounds[static_cast<size_t>(r)];
    for (uint32_t i = 0; i < round.numOps; ++i) {
      const Op& op = plan.ops[round.firstOp + i];
      switch (op.kind) {
        case OpKind::Send: b.send(peer(op.peer), map(plan.src(op, 0)), op.bytes); break;
        case OpKind::Recv: b.recv(peer(op.peer), map(op.dst), op.bytes); break;
        case OpKind::RecvReduce: b.recvReduce(peer(op.peer), map(op.dst), map(plan.src(op, 0)), op.bytes); break;
        case OpKind::Copy: b.copy(map(op.dst), map(plan.src(op, 0)), op.bytes); break;
        case OpKind::Reduce: {
          std::vector<BufRef> srcs;
          for (uint32_t j = 0; j < op.nsrc; ++j) srcs.push_back(map(plan.src(op, j)));
          b.reduce(map(op.dst), srcs, op.bytes);
          break;
        }
        case OpKind::ReduceSpread:  // only the direct and two-shot plans spread: peers' buffers, staging
          throw Error(Code::InternalError, "hierarchical: the inner plan " + plan.algorithm + " spreads a reduction");
        case OpKind::Finalize: break;  // phase F divides the whole segment once
        case OpKind::Barrier: throw Error(Code::InternalError, "hierarchical: the inner plan has a barrier");
      }
    }
  }
  uint64_t innerScratchStride() const { return (innerScratch + 63) / 64 * 64; }

  BufRef recvAt(uint64_t elem) const { return BufRef::recv(elem * elt); }
  BufRef sendAt(uint64_t elem) const { return BufRef::send(elem * elt); }

  /// Round `idx` (0 <= idx < roundsPerSegment()) of segment `seg`.
  void emit(uint64_t seg, int idx) {
    const uint64_t segOff = seg * segElems;
    const uint64_t thisLen = segLen(seg);
    const Blocks shards{thisLen, static_cast<uint64_t>(L)};
    auto shardOff = [&](int j) { return segOff + shards.off(static_cast<uint64_t>(j)); };
    auto shardLen = [&](int j) { return shards.len(static_cast<uint64_t>(j)); };
    if (idx < roundsA()) {  // A: intra-node reduce-scatter step s
      const int s = idx;
      const int sb = mod(li - s - 1, L), rb = mod(li - s - 2, L);
      b.send(localPeer(li + 1), s == 0 ? sendAt(shardOff(sb)) : recvAt(shardOff(sb)), shardLen(sb) * elt);
      b.recvReduce(localPeer(li - 1), recvAt(shardOff(rb)), sendAt(shardOff(rb)), shardLen(rb) * elt);
      return;
    }
    idx -= roundsA();
    if (inner != Algo::Ring && idx < roundsB(seg)) {  // B with another inter-node algorithm
      emitInner(seg, idx);
      return;
    }
    if (inner == Algo::Ring && idx < roundsB(seg)) {  // B: inter-node all-reduce of shard li
      const uint64_t base = shardOff(li);
      const Blocks blocks{shardLen(li), static_cast<uint64_t>(N)};
      auto at = [&](int j) { return base + blocks.off(static_cast<uint64_t>(j)); };
      auto len = [&](int j) { return blocks.len(static_cast<uint64_t>(j)) * elt; };
      // The node-reduced shard is in recv after phase A; with one rank per node it is still in send.
      auto in = [&](int j) { return L > 1 ? recvAt(at(j)) : sendAt(at(j)); };
      if (idx < N - 1) {  // reduce-scatter step s
        const int s = idx;
        const int sb = mod(k - s - 1, N), rb = mod(k - s - 2, N);
        b.send(nodePeer(k + 1), s == 0 ? in(sb) : recvAt(at(sb)), len(sb));
        b.recvReduce(nodePeer(k - 1), recvAt(at(rb)), in(rb), len(rb));
      } else {  // all-gather step s
        const int s = idx - (N - 1);
        const int sb = mod(k - s, N), rb = mod(k - s - 1, N);
        b.send(nodePeer(k + 1), recvAt(at(sb)), len(sb));
        b.recv(nodePeer(k - 1), recvAt(at(rb)), len(rb));
      }
      return;
    }
    idx -= roundsB(seg);
    if (idx < L - 1) {  // C: intra-node all-gather step s
      const int s = idx;
      const int sb = mod(li - s, L), rb = mod(li - s - 1, L);
      b.send(localPeer(li + 1), recvAt(shardOff(sb)), shardLen(sb) * elt);
      b.recv(localPeer(li - 1), recvAt(shardOff(rb)), shardLen(rb) * elt);
      return;
    }
    b.finalize(recvAt(segOff), thisLen * elt);  // the whole segment holds sums over every rank now
  }

  void allReduce() {
    const uint64_t S = segments();
    if (inner != Algo::Ring) {
      scratchRegions = std::min<uint64_t>(S, static_cast<uint64_t>(std::max({1, roundsB(0), roundsB(S - 1)})));
    }
    // Segment s starts D rounds after segment s-1. With the ring between nodes D = 1 (the pipelining
    // note above), and so with any inner algorithm whose plans share a clock (round_alignment.cc): both
    // ends of each message then sit in the same round of every segment. Without one (never for the
    // algorithms built here; kept for safety), segments do not overlap in phase B: D = its length.
    const uint64_t D = inner == Algo::Ring || phaseBAligned() ? 1 : static_cast<uint64_t>(std::max(1, roundsB(0)));
    // Segment s runs its rounds [s * D, s * D + T(s)); T(s) is the same for every segment but maybe the
    // last one.
    std::vector<uint64_t> T(S);
    uint64_t total = 0;
    for (uint64_t seg = 0; seg < S; ++seg) {
      T[seg] = static_cast<uint64_t>(roundsPerSegment(seg));
      total = std::max(total, seg * D + T[seg]);
    }
    for (uint64_t g = 0; g < total; ++g) {
      b.nextRound();
      for (uint64_t seg = 0; seg < S && seg * D <= g; ++seg) {
        if (g - seg * D < T[seg]) emit(seg, static_cast<int>(g - seg * D));
      }
    }
    if (innerScratch > 0) b.needScratch(scratchRegions * innerScratchStride());
  }
};

/// My node and local index in `lay`; false when this rank is not in it.
bool locate(const NodeLayout& lay, int rank, int& node, int& local) {
  for (size_t n = 0; n < lay.nodes.size(); ++n) {
    const auto& v = lay.nodes[n];
    auto it = std::find(v.begin(), v.end(), rank);
    if (it != v.end()) {
      node = static_cast<int>(n);
      local = static_cast<int>(it - v.begin());
      return true;
    }
  }
  return false;
}

}  // namespace

bool hierarchicalApplies(const PlanParams& p) {
  if (!p.layout || !p.layout->uniform()) return false;
  size_t ranks = 0;
  for (const auto& n : p.layout->nodes) ranks += n.size();
  return ranks == static_cast<size_t>(p.nranks) && p.layout->nodes.size() > 1 && p.layout->nodes.front().size() > 0;
}

Plan buildHierarchical(const PlanParams& p, Algo inner) {
  const std::string name = inner == Algo::Ring ? "hier" : "hier_" + std::string(algoName(inner));
  const bool other = p.coll == Collective::AllGather || p.coll == Collective::ReduceScatter ||
                     p.coll == Collective::Broadcast;
  if (p.coll != Collective::AllReduce && !(other && inner == Algo::Ring)) unsupported(name, p.coll);
  int node = 0, local = 0;
  if (!hierarchicalApplies(p) || !locate(*p.layout, p.rank, node, local)) {
    Plan flat = buildRing(p);
    flat.algorithm = name + "(ring)";
    return flat;
  }
  if (other) return buildHierarchicalCollective(p, node, local);
  PlanBuilder b(name);
  const int N = static_cast<int>(p.layout->nodes.size());
  const int L = static_cast<int>(p.layout->nodes.front().size());
  Hier h{b, *p.layout, N, L, node, local, p.eltSize, 0, p.count};
  h.inner = inner;
  h.outer = &p;
  const uint64_t chunk = chunkElems(p);
  h.segElems = chunk > UINT64_MAX / 2 / static_cast<uint64_t>(L) ? UINT64_MAX / 2 : chunk * static_cast<uint64_t>(L);
  h.allReduce();
  return b.finish();
}

}  // namespace conflux::sched
