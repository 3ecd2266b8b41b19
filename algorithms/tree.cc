// Binomial tree, pipelined in chunks.
//
// Ranks are renumbered relative to the root: v = (r - root) mod n, so the root is v = 0. With
// K = ceil(log2 n) steps, rank v (v >= 1) has parent v - 2^k(v), where k(v) = floor(log2 v), and
// children v + 2^k for every k(v) < k < K with v + 2^k < n (the root's children are 2^k, k < K).
//
// Broadcast: in step k, every v < 2^k that has the data sends it to v + 2^k. Pipelined, chunk c moves
//   over step k in round c + k, so in one round a rank receives chunk t - k(v) from its parent and sends
//   older chunks t - k to its children (distinct chunks, so the round's operations never overlap).
// Reduce (any root): the broadcast reversed. Step order s(k) = K-1-k; rank v sends its partial of chunk
//   c to its parent in round c + s(k(v)) and receives chunk c from child v + 2^k in round c + s(k),
//   which is earlier since k > k(v); the first child's data is reduced with the rank's own input, later
//   ones with the partial. Partials live in recv on the root and in scratch elsewhere (recv is written
//   only on the root). The root finalizes the whole vector at the end.
// All-reduce (small messages): reduce to rank 0 with partials in recv on every rank, Finalize on the
//   root, then broadcast from the root's recv.
#include <vector>

#include "algorithms/schedule.h"

namespace conflux::sched {
namespace {

struct Binomial {
  PlanBuilder& b;
  int n, root, v, steps = 0;
  uint32_t elt;
  uint64_t chunk, count;
  int64_t chunks;

  Binomial(PlanBuilder& builder, const PlanParams& p, int rootRank)
      : b(builder), n(p.nranks), root(rootRank), v(mod(p.rank - rootRank, p.nranks)), elt(p.eltSize),
        chunk(chunkElems(p)), count(p.count),
        chunks(static_cast<int64_t>(numChunks(p.count, chunkElems(p)))) {
    while ((1 << steps) < n) ++steps;
  }
  int rankOf(int vv) const { return mod(vv + root, n); }
  /// Step in which v receives (floor(log2 v)); -1 for the root.
  int recvStep() const {
    int k = -1;
    while (k + 1 < 31 && (1 << (k + 1)) <= v) ++k;
    return k;
  }
  BufRef chunkAt(BufRef base, int64_t c, uint64_t* bytes) const {
    const Piece pc = piece(count, chunk, c);
    *bytes = pc.n * elt;
    return at(base, pc.first * elt);
  }
};

/// Pipelined broadcast from virtual rank 0; the root sends from `rootSrc`, others from recv.
void broadcast(Binomial& t, BufRef rootSrc) {
  const int kv = t.recvStep();
  const BufRef from = t.v == 0 ? rootSrc : BufRef::recv(0);
  for (int64_t round = 0; round < t.chunks + t.steps - 1; ++round) {
    uint64_t bytes = 0;
    if (t.v > 0) {
      const BufRef dst = t.chunkAt(BufRef::recv(0), round - kv, &bytes);
      t.b.recv(t.rankOf(t.v - (1 << kv)), dst, bytes);
    }
    for (int k = kv + 1; k < t.steps && t.v + (1 << k) < t.n; ++k) {
      const BufRef src = t.chunkAt(from, round - k, &bytes);
      t.b.send(t.rankOf(t.v + (1 << k)), src, bytes);
    }
    t.b.nextRound();
  }
}

/// Pipelined reduce to virtual rank 0, partials in `acc`.
void reduce(Binomial& t, BufRef acc) {
  const int kv = t.recvStep();
  auto slot = [&](int k) { return t.steps - 1 - k; };
  // Children in arrival order: largest k first.
  std::vector<int> children;
  for (int k = t.steps - 1; k > kv; --k) {
    if (t.v + (1 << k) < t.n) children.push_back(k);
  }
  const int64_t lastRound = t.chunks + t.steps - 1;
  for (int64_t round = 0; round < lastRound; ++round) {
    t.b.nextRound();
    uint64_t bytes = 0;
    for (size_t i = 0; i < children.size(); ++i) {
      const int64_t c = round - slot(children[i]);
      const BufRef dst = t.chunkAt(acc, c, &bytes);
      const BufRef mine = i == 0 ? t.chunkAt(BufRef::send(0), c, &bytes) : dst;
      t.b.recvReduce(t.rankOf(t.v + (1 << children[i])), dst, mine, bytes);
    }
    if (t.v > 0) {
      const BufRef src = t.chunkAt(children.empty() ? BufRef::send(0) : acc, round - slot(kv), &bytes);
      t.b.send(t.rankOf(t.v - (1 << kv)), src, bytes);
    }
  }
  t.b.nextRound();
}

}  // namespace

Plan buildBinomialTree(const PlanParams& p) {
  PlanBuilder b("tree");
  if (p.nranks == 1) {
    singleRank(b, p);
    return b.finish();
  }
  const uint64_t bytes = p.count * p.eltSize;
  switch (p.coll) {
    case Collective::Broadcast: {
      Binomial t(b, p, p.root);
      if (t.v == 0) b.copy(BufRef::recv(0), BufRef::send(0), bytes);
      broadcast(t, BufRef::send(0));
      break;
    }
    case Collective::Reduce: {
      Binomial t(b, p, p.root);
      if (t.v != 0) b.needScratch(bytes);
      reduce(t, t.v == 0 ? BufRef::recv(0) : BufRef::scratch(0));
      if (t.v == 0) b.finalize(BufRef::recv(0), bytes);
      break;
    }
    case Collective::AllReduce: {
      Binomial t(b, p, 0);
      reduce(t, BufRef::recv(0));
      if (t.v == 0) b.finalize(BufRef::recv(0), bytes);
      b.nextRound();
      broadcast(t, BufRef::recv(0));
      break;
    }
    default: unsupported("tree", p.coll);
  }
  return b.finish();
}

}  // namespace conflux::sched
