// Ring algorithms.
//
// Ranks form the ring r -> r+1 (mod n). The vector is cut into n blocks (uneven counts: the first
// count % n blocks get one extra element).
//
// Reduce-scatter (n-1 steps), ending with rank r holding the fully reduced block r:
//   step s: send block (r-s-1) to r+1 and receive block (r-s-2) from r-1, reducing it with this rank's
//   own contribution. Step 0 sends the rank's own input; step s > 0 forwards the partial received in
//   step s-1. The last step (s = n-2) receives block r and writes it to its final place.
// All-gather (n-1 steps), starting with rank r holding block r:
//   step s: send block (r-s) to r+1 and receive block (r-s-1) from r-1 into its final place.
// Every step is one round per chunk: a block larger than chunkBytes is sent as several pieces, piece j
// of the step in the step's j-th round, so one round never moves more than chunkBytes per peer.
//
// All-reduce = reduce-scatter (partials kept in recv) + Finalize of the owned block + all-gather.
// Reduce-scatter (collective) = reduce-scatter with partials double-buffered in scratch (recv may alias
//   the rank's own input block, which the last step still needs) + Finalize.
// All-gather (collective) = all-gather, with the own block copied to its place piece by piece: piece j
//   in round j of step 0, beside the send of the same piece, so the copy interleaves with the exchange
//   instead of holding up round 0 (a 16 MiB block copied whole in round 0 kept the peer waiting for
//   chunk 1 until it was done).
// Reduce = reduce-scatter (partials in recv on the root, in scratch elsewhere: recv is written only on
//   the root) + every rank sends its reduced block to the root + Finalize on the root.
// Broadcast = pipelined chain root -> root+1 -> ... in chunks: in round t the rank at distance p from
//   the root receives chunk t-p+1 and forwards chunk t-p (received in the previous round).
#include <functional>

#include "algorithms/schedule.h"

namespace conflux::sched {
namespace {

/// Where block b lives for some role, e.g. recv(off(b)).
using BlockLoc = std::function<BufRef(int block)>;

struct Ring {
  PlanBuilder& b;
  int n, r;
  uint32_t elt;
  uint64_t chunk;  // elements
  Blocks blocks;
  int next() const { return mod(r + 1, n); }
  int prev() const { return mod(r - 1, n); }
  uint64_t rounds() const { return numChunks(blocks.maxLen(), chunk); }
};

/// Reduce-scatter; `in(b)`: own contribution, `tmp(b, s)`: partial received in step s < n-2,
/// `out(b)`: final place of the owned block.
void reduceScatter(Ring& g, const BlockLoc& in, const std::function<BufRef(int, int)>& tmp,
                   const BlockLoc& out) {
  for (int s = 0; s + 1 < g.n; ++s) {
    const int sb = mod(g.r - s - 1, g.n), rb = mod(g.r - s - 2, g.n);
    const BufRef from = s == 0 ? in(sb) : tmp(sb, s - 1);
    const BufRef to = s == g.n - 2 ? out(rb) : tmp(rb, s);
    const BufRef mine = in(rb);
    for (uint64_t j = 0; j < g.rounds(); ++j) {
      g.b.nextRound();
      const Piece ps = piece(g.blocks.len(sb), g.chunk, static_cast<int64_t>(j));
      const Piece pr = piece(g.blocks.len(rb), g.chunk, static_cast<int64_t>(j));
      g.b.send(g.next(), at(from, ps.first * g.elt), ps.n * g.elt);
      g.b.recvReduce(g.prev(), at(to, pr.first * g.elt), at(mine, pr.first * g.elt), pr.n * g.elt);
    }
  }
}

/// All-gather; `own`: where this rank's block is at the start, `dst(b)`: final place of block b.
/// `ownPiece` (optional) is emitted as a local op in round j of step 0 for piece j of the own block
/// (n >= 2: buildRing handles one rank with singleRank).
void allGather(Ring& g, BufRef own, const BlockLoc& dst, const std::function<void(const Piece&)>& ownPiece) {
  for (int s = 0; s + 1 < g.n; ++s) {
    const int sb = mod(g.r - s, g.n), rb = mod(g.r - s - 1, g.n);
    const BufRef from = s == 0 ? own : dst(sb);
    for (uint64_t j = 0; j < g.rounds(); ++j) {
      g.b.nextRound();
      const Piece ps = piece(g.blocks.len(sb), g.chunk, static_cast<int64_t>(j));
      const Piece pr = piece(g.blocks.len(rb), g.chunk, static_cast<int64_t>(j));
      g.b.send(g.next(), at(from, ps.first * g.elt), ps.n * g.elt);
      g.b.recv(g.prev(), at(dst(rb), pr.first * g.elt), pr.n * g.elt);
      if (s == 0 && ownPiece && ps.n > 0) ownPiece(ps);
    }
  }
}

void allReduce(Ring& g) {
  auto recvAt = [&](int blk) { return BufRef::recv(g.blocks.off(blk) * g.elt); };
  auto sendAt = [&](int blk) { return BufRef::send(g.blocks.off(blk) * g.elt); };
  reduceScatter(g, sendAt, [&](int blk, int) { return recvAt(blk); }, recvAt);
  g.b.nextRound();
  g.b.finalize(recvAt(g.r), g.blocks.len(g.r) * g.elt);
  allGather(g, recvAt(g.r), recvAt, nullptr);
}

void reduceScatterColl(Ring& g, uint64_t count) {
  const uint64_t blockBytes = count * g.elt;
  if (g.n > 2) g.b.needScratch(std::min(2, g.n - 2) * blockBytes);
  reduceScatter(
      g, [&](int blk) { return BufRef::send(blk * blockBytes); },
      [&](int, int s) { return BufRef::scratch((s & 1) * blockBytes); },
      [&](int) { return BufRef::recv(0); });
  g.b.nextRound();
  g.b.finalize(BufRef::recv(0), blockBytes);
}

void allGatherColl(Ring& g, uint64_t count) {
  const uint64_t blockBytes = count * g.elt;
  const BufRef mine = BufRef::recv(g.r * blockBytes);
  allGather(
      g, BufRef::send(0), [&](int blk) { return BufRef::recv(blk * blockBytes); },
      [&](const Piece& pc) { g.b.copy(at(mine, pc.first * g.elt), BufRef::send(pc.first * g.elt), pc.n * g.elt); });
}

void reduceColl(Ring& g, int root) {
  const bool isRoot = g.r == root;
  auto accAt = [&](int blk) {
    const uint64_t off = g.blocks.off(blk) * g.elt;
    return isRoot ? BufRef::recv(off) : BufRef::scratch(off);
  };
  if (!isRoot) g.b.needScratch(g.blocks.count * g.elt);
  reduceScatter(
      g, [&](int blk) { return BufRef::send(g.blocks.off(blk) * g.elt); },
      [&](int blk, int) { return accAt(blk); }, accAt);
  for (uint64_t j = 0; j < g.rounds(); ++j) {
    g.b.nextRound();
    for (int q = 0; q < g.n; ++q) {
      if (q == root || (!isRoot && q != g.r)) continue;
      const Piece pc = piece(g.blocks.len(q), g.chunk, static_cast<int64_t>(j));
      const uint64_t off = (g.blocks.off(q) + pc.first) * g.elt;
      if (isRoot) g.b.recv(q, BufRef::recv(off), pc.n * g.elt);
      else g.b.send(root, BufRef::scratch(off), pc.n * g.elt);
    }
  }
  g.b.nextRound();
  if (isRoot) g.b.finalize(BufRef::recv(0), g.blocks.count * g.elt);
}

void broadcastColl(Ring& g, int root, uint64_t count) {
  const int p = mod(g.r - root, g.n);
  const int64_t chunks = static_cast<int64_t>(numChunks(count, g.chunk));
  const BufRef from = p == 0 ? BufRef::send(0) : BufRef::recv(0);
  if (p == 0) g.b.copy(BufRef::recv(0), BufRef::send(0), count * g.elt);
  for (int64_t t = 0; t < chunks + g.n - 2; ++t) {
    if (p >= 1) {
      const Piece pc = piece(count, g.chunk, t - (p - 1));
      g.b.recv(g.prev(), BufRef::recv(pc.first * g.elt), pc.n * g.elt);
    }
    if (p <= g.n - 2) {
      const Piece pc = piece(count, g.chunk, t - p);
      g.b.send(g.next(), at(from, pc.first * g.elt), pc.n * g.elt);
    }
    g.b.nextRound();
  }
}

}  // namespace

Plan buildRing(const PlanParams& p) {
  PlanBuilder b("ring");
  if (p.nranks == 1) {
    if (p.coll == Collective::AllToAll || p.coll == Collective::SendRecv) unsupported("ring", p.coll);
    singleRank(b, p);
    return b.finish();
  }
  const uint64_t n = static_cast<uint64_t>(p.nranks);
  Ring g{b, p.nranks, p.rank, p.eltSize, chunkElems(p), Blocks{p.count, n}};
  switch (p.coll) {
    case Collective::AllReduce: allReduce(g); break;
    case Collective::ReduceScatter:
      g.blocks = Blocks{p.count * n, n};
      reduceScatterColl(g, p.count);
      break;
    case Collective::AllGather:
      g.blocks = Blocks{p.count * n, n};
      allGatherColl(g, p.count);
      break;
    case Collective::Reduce: reduceColl(g, p.root); break;
    case Collective::Broadcast: broadcastColl(g, p.root, p.count); break;
    default: unsupported("ring", p.coll);
  }
  return b.finish();
}

}  // namespace conflux::sched
