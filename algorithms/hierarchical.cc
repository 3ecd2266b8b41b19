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
// Layouts that are not uniform (e.g. 2 + 1 ranks) or absent fall back to the flat ring schedule, named
// "hier(ring)", so the plan is correct for every communicator.
#include <algorithm>

#include "algorithms/schedule.h"

namespace conflux::sched {
namespace {

struct Hier {
  PlanBuilder& b;
  const NodeLayout& lay;
  int N, L, k, li;  // nodes, ranks per node, my node, my local index
  uint32_t elt;
  uint64_t segElems;
  uint64_t count;

  int localPeer(int j) const { return lay.nodes[static_cast<size_t>(k)][static_cast<size_t>(mod(j, L))]; }
  int nodePeer(int j) const { return lay.nodes[static_cast<size_t>(mod(j, N))][static_cast<size_t>(li)]; }
  int roundsA() const { return L - 1; }
  int roundsB() const { return 2 * (N - 1); }
  int roundsPerSegment() const { return roundsA() + roundsB() + (L - 1) + 1; }  // + the Finalize round
  uint64_t segments() const { return std::max<uint64_t>(1, numChunks(count, segElems)); }

  BufRef recvAt(uint64_t elem) const { return BufRef::recv(elem * elt); }
  BufRef sendAt(uint64_t elem) const { return BufRef::send(elem * elt); }

  /// Round `idx` (0 <= idx < roundsPerSegment()) of segment `seg`.
  void emit(uint64_t seg, int idx) {
    const uint64_t segOff = seg * segElems;
    const uint64_t segLen = std::min(segElems, count - std::min(count, segOff));
    const Blocks shards{segLen, static_cast<uint64_t>(L)};
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
    if (idx < roundsB()) {  // B: inter-node all-reduce of shard li
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
    idx -= roundsB();
    if (idx < L - 1) {  // C: intra-node all-gather step s
      const int s = idx;
      const int sb = mod(li - s, L), rb = mod(li - s - 1, L);
      b.send(localPeer(li + 1), recvAt(shardOff(sb)), shardLen(sb) * elt);
      b.recv(localPeer(li - 1), recvAt(shardOff(rb)), shardLen(rb) * elt);
      return;
    }
    b.finalize(recvAt(segOff), segLen * elt);  // the whole segment holds sums over every rank now
  }

  void allReduce() {
    const int T = roundsPerSegment();
    const uint64_t S = segments();
    const uint64_t D = 1;  // see the pipelining note above
    const uint64_t total = (S - 1) * D + static_cast<uint64_t>(T);
    for (uint64_t g = 0; g < total; ++g) {
      b.nextRound();
      // Segments whose round g - seg * D is in [0, T), in segment order.
      const uint64_t first = g + 1 > static_cast<uint64_t>(T) ? (g + 1 - static_cast<uint64_t>(T) + D - 1) / D : 0;
      for (uint64_t seg = first; seg < S && seg * D <= g; ++seg) emit(seg, static_cast<int>(g - seg * D));
    }
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

Plan buildHierarchical(const PlanParams& p) {
  if (p.coll != Collective::AllReduce) unsupported("hier", p.coll);
  int node = 0, local = 0;
  if (!hierarchicalApplies(p) || !locate(*p.layout, p.rank, node, local)) {
    Plan flat = buildRing(p);
    flat.algorithm = "hier(ring)";
    return flat;
  }
  PlanBuilder b("hier");
  const int N = static_cast<int>(p.layout->nodes.size());
  const int L = static_cast<int>(p.layout->nodes.front().size());
  Hier h{b, *p.layout, N, L, node, local, p.eltSize, 0, p.count};
  const uint64_t chunk = chunkElems(p);
  h.segElems = chunk > UINT64_MAX / 2 / static_cast<uint64_t>(L) ? UINT64_MAX / 2 : chunk * static_cast<uint64_t>(L);
  h.allReduce();
  return b.finish();
}

}  // namespace conflux::sched
