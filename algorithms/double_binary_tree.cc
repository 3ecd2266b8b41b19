// Double binary tree, pipelined in chunks.
//
// Tree shape over m nodes: give node i the 1-based position P(i); a position P with lowest set bit b
// has natural parent P - b if P & 2b, else P + b (the in-order numbering of an infinite binary tree:
// odd positions are leaves). Parents beyond m are skipped by walking further up; the root is the
// largest power of two <= m. Tree 0 uses P(i) = i + 1, tree 1 the positions shifted by one,
// P(i) = ((i + 1) mod m) + 1. Tree 0's leaves are the even indices, tree 1's the odd ones (and m-1),
// so every node is a leaf in at least one tree and an inner node in at most one: each tree carries
// half of the vector and both halves use every rank's links.
//
// Pipeline timing, for chunk c of a tree's half:
//   up (reduce):  node i sends its partial to its parent in round c + S(i). A leaf has S = 0; an inner
//                 node is ready at R(i) = max S(child) + 1 and sends at S(i) = R(i), except that two
//                 siblings never share a send round (the second is delayed by one), so a node never
//                 reduces two arrivals of the same chunk in one round.
//   down (bcast): the root has chunk c at round c + F; a node at depth d receives it in round
//                 c + F + d and forwards it in the next round.
//   All offsets a node uses in one round are distinct, so its round's operations touch distinct chunks.
// All-reduce: both trees over all n ranks; up, Finalize at the tree root in round c + R(root), down
//   starting at F = R(root) + 1. Broadcast/Reduce (any root): the two trees span the n-1 other ranks;
//   the root feeds (or drains) both tree roots directly, half 0 through tree 0 and half 1 through tree 1.
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "algorithms/schedule.h"

namespace conflux::sched {
namespace {

struct Tree {
  int root = 0;
  std::vector<int> parent;                 // -1 for the root
  std::vector<std::array<int, 2>> child;   // -1 when absent, sorted by position
  std::vector<int> sendAt, readyAt, depth; // S(i), R(i), depth(i)
};

int parentPos(int pos, int m) {
  auto up = [](int x) {
    const int low = x & -x;
    return (x & (2 * low)) ? x - low : x + low;
  };
  int q = up(pos);
  while (q > m) q = up(q);
  return q;
}

void timeUp(Tree& t, int i) {
  int ready = 0, prevSend = -1;
  for (int c : t.child[i]) {
    if (c < 0) continue;
    timeUp(t, c);
    t.sendAt[c] = t.readyAt[c] == prevSend ? t.readyAt[c] + 1 : t.readyAt[c];
    prevSend = t.sendAt[c];
    ready = std::max(ready, t.sendAt[c] + 1);
  }
  t.readyAt[i] = ready;
  t.sendAt[i] = ready;
}

/// Node i's children in the order their partials arrive (by send slot), -1 when absent.
std::array<int, 2> byArrival(const Tree& t, int i) {
  std::array<int, 2> c = t.child[i];
  if (c[1] >= 0 && t.sendAt[c[1]] < t.sendAt[c[0]]) std::swap(c[0], c[1]);
  return c;
}

void timeDown(Tree& t, int i, int d) {
  t.depth[i] = d;
  for (int c : t.child[i]) {
    if (c >= 0) timeDown(t, c, d + 1);
  }
}

Tree makeTree(int m, int variant) {
  Tree t;
  t.parent.assign(m, -1);
  t.child.assign(m, {-1, -1});
  t.sendAt.assign(m, 0);
  t.readyAt.assign(m, 0);
  t.depth.assign(m, 0);
  auto indexOf = [&](int pos) { return variant == 0 ? pos - 1 : mod(pos - 2, m); };
  int top = 1;
  while (top * 2 <= m) top *= 2;
  t.root = indexOf(top);
  for (int pos = 1; pos <= m; ++pos) {  // increasing positions: children end up sorted
    if (pos == top) continue;
    const int i = indexOf(pos), par = indexOf(parentPos(pos, m));
    t.parent[i] = par;
    auto& slots = t.child[par];
    (slots[0] < 0 ? slots[0] : slots[1]) = i;
  }
  timeUp(t, t.root);
  timeDown(t, t.root, 0);
  return t;
}

struct Ctx {
  PlanBuilder& b;
  uint32_t elt;
  uint64_t chunk;
  Blocks halves;
};

struct Slice {
  BufRef ref;
  uint64_t bytes;
};

/// Chunk c of half h at `base` (0 bytes when c is out of range).
Slice half(const Ctx& x, BufRef base, int h, int64_t c) {
  const Piece pc = piece(x.halves.len(h), x.chunk, c);
  return {at(base, (x.halves.off(h) + pc.first) * x.elt), pc.n * x.elt};
}

int64_t chunksOf(const Ctx& x, int h) { return static_cast<int64_t>(numChunks(x.halves.len(h), x.chunk)); }

/// All-reduce over trees spanning all ranks (index == rank).
void allReduce(Ctx& x, int n, int r) {
  const std::array<Tree, 2> trees = {makeTree(n, 0), makeTree(n, 1)};
  int64_t last = 0;
  for (int h = 0; h < 2; ++h) {
    int maxDepth = 0;
    for (int d : trees[h].depth) maxDepth = std::max(maxDepth, d);
    last = std::max(last, chunksOf(x, h) + trees[h].readyAt[trees[h].root] + maxDepth + 1);
  }
  const BufRef recv = BufRef::recv(0), send = BufRef::send(0);
  for (int64_t t = 0; t <= last; ++t) {
    for (int h = 0; h < 2; ++h) {
      const Tree& tr = trees[h];
      const int fin = tr.readyAt[tr.root];
      bool first = true;
      for (int c : byArrival(tr, r)) {  // up
        if (c < 0) continue;
        const int64_t k = t - tr.sendAt[c];
        const Slice dst = half(x, recv, h, k);
        x.b.recvReduce(c, dst.ref, first ? half(x, send, h, k).ref : dst.ref, dst.bytes);
        first = false;
      }
      const bool leaf = tr.child[r][0] < 0;
      if (tr.parent[r] >= 0) {
        const Slice up = half(x, leaf ? send : recv, h, t - tr.sendAt[r]);
        x.b.send(tr.parent[r], up.ref, up.bytes);
        const Slice down = half(x, recv, h, t - fin - tr.depth[r]);
        x.b.recv(tr.parent[r], down.ref, down.bytes);
      } else {
        const Slice done = half(x, recv, h, t - fin);
        x.b.finalize(done.ref, done.bytes);
      }
      const Slice fwd = half(x, recv, h, t - fin - tr.depth[r] - 1);
      for (int c : tr.child[r]) {  // down
        if (c >= 0) x.b.send(c, fwd.ref, fwd.bytes);
      }
    }
    x.b.nextRound();
  }
}

/// Broadcast (down = true) or reduce from/to `root`; the trees span the other ranks, index i being
/// rank (root + 1 + i) mod n.
void rooted(Ctx& x, int n, int r, int root, bool down) {
  const int m = n - 1;
  const std::array<Tree, 2> trees = {makeTree(m, 0), makeTree(m, 1)};
  auto rankOf = [&](int i) { return i < 0 ? root : (root + 1 + i) % n; };
  const int me = r == root ? -1 : mod(r - root - 1, n);
  const bool leaf0 = me >= 0 && trees[0].child[me][0] < 0, leaf1 = me >= 0 && trees[1].child[me][0] < 0;
  if (!down && me >= 0 && !(leaf0 && leaf1)) x.b.needScratch(x.halves.count * x.elt);
  const BufRef send = BufRef::send(0), recv = BufRef::recv(0);
  const BufRef acc = me < 0 ? recv : BufRef::scratch(0);
  if (down && me < 0) x.b.copy(recv, send, x.halves.count * x.elt);
  int64_t last = 0;
  for (int h = 0; h < 2; ++h) {
    int span = 0;
    for (int i = 0; i < m; ++i) span = std::max(span, down ? trees[h].depth[i] + 1 : trees[h].sendAt[i]);
    last = std::max(last, chunksOf(x, h) + span);
  }
  for (int64_t t = 0; t <= last; ++t) {
    for (int h = 0; h < 2; ++h) {
      const Tree& tr = trees[h];
      if (me < 0) {  // the collective's root talks to the tree root only
        const int peer = rankOf(tr.root);
        if (down) {
          const Slice out = half(x, send, h, t);
          x.b.send(peer, out.ref, out.bytes);
        } else {
          const int64_t k = t - tr.sendAt[tr.root];
          const Slice in = half(x, recv, h, k);
          x.b.recvReduce(peer, in.ref, half(x, send, h, k).ref, in.bytes);
        }
        continue;
      }
      const int par = rankOf(tr.parent[me]);
      if (down) {
        const int d = tr.depth[me];
        const Slice in = half(x, recv, h, t - d), out = half(x, recv, h, t - d - 1);
        x.b.recv(par, in.ref, in.bytes);
        for (int c : tr.child[me]) {
          if (c >= 0) x.b.send(rankOf(c), out.ref, out.bytes);
        }
        continue;
      }
      bool first = true;
      for (int c : byArrival(tr, me)) {
        if (c < 0) continue;
        const int64_t k = t - tr.sendAt[c];
        const Slice dst = half(x, acc, h, k);
        x.b.recvReduce(rankOf(c), dst.ref, first ? half(x, send, h, k).ref : dst.ref, dst.bytes);
        first = false;
      }
      const bool leaf = tr.child[me][0] < 0;
      const Slice up = half(x, leaf ? send : acc, h, t - tr.sendAt[me]);
      x.b.send(par, up.ref, up.bytes);
    }
    x.b.nextRound();
  }
  if (!down && me < 0) x.b.finalize(recv, x.halves.count * x.elt);
}

}  // namespace

DbtreeFacts dbtreeFacts(int m) {
  DbtreeFacts f;
  f.sendsTo.assign(static_cast<size_t>(std::max(0, m)), {});
  if (m < 2) return f;
  for (int variant = 0; variant < 2; ++variant) {
    const Tree t = makeTree(m, variant);
    int maxDepth = 0;
    for (int d : t.depth) maxDepth = std::max(maxDepth, d);
    // allReduce moves chunk k up and back down in rounds k .. k + R(root) + maxDepth: a chunk's trip.
    f.fillRounds = std::max(f.fillRounds, t.readyAt[t.root] + maxDepth + 1);
    for (int i = 0; i < m; ++i) {
      if (t.parent[i] >= 0) f.sendsTo[i].push_back(t.parent[i]);
      for (int c : t.child[i]) {
        if (c >= 0) f.sendsTo[i].push_back(c);
      }
    }
  }
  return f;
}

Plan buildDoubleBinaryTree(const PlanParams& p) {
  PlanBuilder b("dbtree");
  if (p.nranks == 1) {
    singleRank(b, p);
    return b.finish();
  }
  Ctx x{b, p.eltSize, chunkElems(p), Blocks{p.count, 2}};
  switch (p.coll) {
    case Collective::AllReduce: allReduce(x, p.nranks, p.rank); break;
    case Collective::Broadcast: rooted(x, p.nranks, p.rank, p.root, true); break;
    case Collective::Reduce: rooted(x, p.nranks, p.rank, p.root, false); break;
    default: unsupported("dbtree", p.coll);
  }
  return b.finish();
}

}  // namespace conflux::sched
