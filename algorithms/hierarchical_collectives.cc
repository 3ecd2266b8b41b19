// Hierarchical all-gather, reduce-scatter and broadcast across nodes (the all-reduce is in
// hierarchical.cc). Layout: N nodes of L ranks (PlanParams::layout, uniform); rank (node k, local index
// i). Every inter-node step runs between the ranks of equal local index, so each local rank drives its
// own rail, and a node's link carries each byte once instead of once per ring crossing.
//
// All-gather (blocks of `count` elements; block g is rank g's, at recv + g * count):
//   round 0: copy my block from send into place.
//   B. ring between nodes over the ranks with local index i (N-1 steps): step s sends the block of
//      node k-s's rank i to node k+1 and receives node k-s-1's. Afterwards I hold the N blocks of local
//      index i ("set i").
//   C. ring inside the node over local indices (L-1 steps): step s sends set i-s (N messages, one per
//      block) to local i+1 and receives set i-s-1 from local i-1.
//   Network bytes per rank: (N-1) blocks; the flat ring moves n-1 blocks over each node's crossing.
//
// Reduce-scatter (send holds n blocks; recv = my block, reduced over every rank):
//   A. ring reduce-scatter inside the node over the sets (L-1 steps): step s sends set i-s-1 (from send
//      at step 0, else the partial received the step before) and receive-reduces set i-s-2 with my own
//      input. After the last step, acc (scratch) holds set i summed over my node. Partials alternate
//      between two scratch sets (a set is still being sent while the next one arrives).
//   B. ring reduce-scatter between nodes over acc's N blocks (N-1 steps), ending in recv; then Finalize.
//   With L = 1 phase A is empty and acc is the send buffer itself.
//
// Broadcast (root at node r, local index j; the message is cut into L shards):
//   1. the root sends shard q to its node's local rank q (and copies send into recv);
//   2. for every local index q, a pipelined chain between nodes r -> r+1 -> ... carries shard q from
//      node r's rank q to every node's rank q, chunk by chunk;
//   3. ring all-gather of the shards inside every node (L-1 steps).
//   Each node receives each byte once, over L rails at once: pays with a NIC per local rank, not on a
//   single link (where it adds phases 1 and 3 to the chain); the cost model chooses.
//
// Every step is cut into rounds of at most one chunk per message, as in ring.cc. Sends and receives of
// one round between the same two ranks are emitted in the same order on both sides (node order), so
// they match in FIFO order.
#include <algorithm>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/schedule.h"
#include "core/error.h"

namespace conflux::sched {
namespace {

struct HierColl {
  PlanBuilder& b;
  const NodeLayout& lay;
  int N, L, k, li;  // nodes, ranks per node, my node, my local index
  uint32_t elt;
  uint64_t chunk;  // elements per message

  int rankAt(int node, int local) const {
    return lay.nodes[static_cast<size_t>(mod(node, N))][static_cast<size_t>(mod(local, L))];
  }
  uint64_t rounds(uint64_t len) const { return numChunks(len, chunk); }

  void allGather(uint64_t count) {
    const uint64_t blk = count * elt;
    auto recvOf = [&](int g) { return BufRef::recv(static_cast<uint64_t>(g) * blk); };
    const int me = rankAt(k, li);
    b.nextRound();
    if (blk > 0) b.copy(recvOf(me), BufRef::send(0), blk);
    for (int s = 0; s + 1 < N; ++s) {  // B
      const BufRef from = s == 0 ? BufRef::send(0) : recvOf(rankAt(k - s, li));
      const BufRef to = recvOf(rankAt(k - s - 1, li));
      for (uint64_t j = 0; j < rounds(count); ++j) {
        b.nextRound();
        const Piece pc = piece(count, chunk, static_cast<int64_t>(j));
        b.send(rankAt(k + 1, li), at(from, pc.first * elt), pc.n * elt);
        b.recv(rankAt(k - 1, li), at(to, pc.first * elt), pc.n * elt);
      }
    }
    for (int s = 0; s + 1 < L; ++s) {  // C
      for (uint64_t j = 0; j < rounds(count); ++j) {
        b.nextRound();
        const Piece pc = piece(count, chunk, static_cast<int64_t>(j));
        for (int node = 0; node < N; ++node) {
          b.send(rankAt(k, li + 1), at(recvOf(rankAt(node, li - s)), pc.first * elt), pc.n * elt);
        }
        for (int node = 0; node < N; ++node) {
          b.recv(rankAt(k, li - 1), at(recvOf(rankAt(node, li - s - 1)), pc.first * elt), pc.n * elt);
        }
      }
    }
  }

  void reduceScatter(uint64_t count) {
    const uint64_t blk = count * elt;
    auto sendOf = [&](int g) { return BufRef::send(static_cast<uint64_t>(g) * blk); };
    // Scratch: acc (N blocks, when L > 1), phase A partials (2 sets, when L > 2), phase B partials
    // (2 blocks, when N > 2).
    const uint64_t accBytes = L > 1 ? N * blk : 0;
    const uint64_t tmpABytes = L > 2 ? 2 * N * blk : 0;
    const uint64_t tmpBBytes = N > 2 ? 2 * blk : 0;
    b.needScratch(accBytes + tmpABytes + tmpBBytes);
    auto acc = [&](int node) {
      return L > 1 ? BufRef::scratch(static_cast<uint64_t>(mod(node, N)) * blk) : sendOf(rankAt(node, li));
    };
    auto tmpA = [&](int node, int s) {
      return BufRef::scratch(accBytes + (static_cast<uint64_t>(s & 1) * N + static_cast<uint64_t>(node)) * blk);
    };
    auto tmpB = [&](int s) { return BufRef::scratch(accBytes + tmpABytes + static_cast<uint64_t>(s & 1) * blk); };
    for (int s = 0; s + 1 < L; ++s) {  // A
      const int sj = li - s - 1, rj = li - s - 2;
      for (uint64_t j = 0; j < rounds(count); ++j) {
        b.nextRound();
        const Piece pc = piece(count, chunk, static_cast<int64_t>(j));
        const uint64_t off = pc.first * elt;
        for (int node = 0; node < N; ++node) {
          const BufRef from = s == 0 ? sendOf(rankAt(node, sj)) : tmpA(node, s - 1);
          b.send(rankAt(k, li + 1), at(from, off), pc.n * elt);
        }
        for (int node = 0; node < N; ++node) {
          const BufRef to = s == L - 2 ? acc(node) : tmpA(node, s);
          b.recvReduce(rankAt(k, li - 1), at(to, off), at(sendOf(rankAt(node, rj)), off), pc.n * elt);
        }
      }
    }
    for (int s = 0; s + 1 < N; ++s) {  // B
      const int sb = k - s - 1, rb = k - s - 2;
      const BufRef from = s == 0 ? acc(sb) : tmpB(s - 1);
      const BufRef to = s == N - 2 ? BufRef::recv(0) : tmpB(s);
      for (uint64_t j = 0; j < rounds(count); ++j) {
        b.nextRound();
        const Piece pc = piece(count, chunk, static_cast<int64_t>(j));
        const uint64_t off = pc.first * elt;
        b.send(rankAt(k + 1, li), at(from, off), pc.n * elt);
        b.recvReduce(rankAt(k - 1, li), at(to, off), at(acc(rb), off), pc.n * elt);
      }
    }
    b.nextRound();
    b.finalize(BufRef::recv(0), blk);
  }

  void broadcast(uint64_t count, int rootNode, int rootLocal) {
    const Blocks shards{count, static_cast<uint64_t>(L)};
    auto shardAt = [&](BufRef base, int q, uint64_t first) {
      return at(base, (shards.off(static_cast<uint64_t>(mod(q, L))) + first) * elt);
    };
    const bool isRoot = k == rootNode && li == rootLocal;
    if (k == rootNode && L > 1) {  // 1
      const uint64_t r = rounds(shards.maxLen());
      for (uint64_t j = 0; j < r; ++j) {
        b.nextRound();
        for (int q = 0; q < L; ++q) {
          const Piece pc = piece(shards.len(static_cast<uint64_t>(q)), chunk, static_cast<int64_t>(j));
          if (isRoot && q != li) b.send(rankAt(k, q), shardAt(BufRef::send(0), q, pc.first), pc.n * elt);
          if (!isRoot && q == li) b.recv(rankAt(k, rootLocal), shardAt(BufRef::recv(0), q, pc.first), pc.n * elt);
        }
      }
    }
    if (isRoot) {
      b.nextRound();
      b.copy(BufRef::recv(0), BufRef::send(0), count * elt);
    }
    // 2: the chain of local index li, position p from the root's node.
    const int p = mod(k - rootNode, N);
    const uint64_t len = shards.len(static_cast<uint64_t>(li));
    const int64_t chunks = static_cast<int64_t>(rounds(len));
    for (int64_t t = 0; chunks > 0 && t < chunks + N - 2; ++t) {
      b.nextRound();
      if (p >= 1) {
        const Piece pc = piece(len, chunk, t - (p - 1));
        b.recv(rankAt(k - 1, li), shardAt(BufRef::recv(0), li, pc.first), pc.n * elt);
      }
      if (p <= N - 2) {
        const Piece pc = piece(len, chunk, t - p);
        b.send(rankAt(k + 1, li), shardAt(BufRef::recv(0), li, pc.first), pc.n * elt);
      }
    }
    for (int s = 0; s + 1 < L; ++s) {  // 3
      const int sj = li - s, rj = li - s - 1;
      const uint64_t r = rounds(shards.maxLen());
      for (uint64_t j = 0; j < r; ++j) {
        b.nextRound();
        const Piece ps = piece(shards.len(static_cast<uint64_t>(mod(sj, L))), chunk, static_cast<int64_t>(j));
        const Piece pr = piece(shards.len(static_cast<uint64_t>(mod(rj, L))), chunk, static_cast<int64_t>(j));
        b.send(rankAt(k, li + 1), shardAt(BufRef::recv(0), sj, ps.first), ps.n * elt);
        b.recv(rankAt(k, li - 1), shardAt(BufRef::recv(0), rj, pr.first), pr.n * elt);
      }
    }
  }
};

}  // namespace

Plan buildHierarchicalCollective(const PlanParams& p, int node, int local) {
  PlanBuilder b("hier");
  const int N = static_cast<int>(p.layout->nodes.size());
  const int L = static_cast<int>(p.layout->nodes.front().size());
  HierColl h{b, *p.layout, N, L, node, local, p.eltSize, chunkElems(p)};
  switch (p.coll) {
    case Collective::AllGather: h.allGather(p.count); break;
    case Collective::ReduceScatter: h.reduceScatter(p.count); break;
    case Collective::Broadcast: {
      int rootNode = 0, rootLocal = 0;
      for (int n = 0; n < N; ++n) {
        for (int l = 0; l < L; ++l) {
          if (h.rankAt(n, l) == p.root) rootNode = n, rootLocal = l;
        }
      }
      h.broadcast(p.count, rootNode, rootLocal);
      break;
    }
    default: unsupported("hier", p.coll);
  }
  return b.finish();
}

}  // namespace conflux::sched
