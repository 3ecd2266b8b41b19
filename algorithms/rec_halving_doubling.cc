// Recursive halving / doubling (Rabenseifner).
//
// Let P be the largest power of two <= n and E = n - P ("extra" ranks). Ranks r < 2E pair up (r even
// with r+1): the even rank folds its data into its odd partner and sits out; the odd one continues as
// "new rank" r/2. Ranks r >= 2E continue as new rank r - E. The P new ranks then run:
//
// All-reduce (vector cut into P blocks):
//   fold-in:  even r < 2E sends its whole input to r+1, which reduces it into recv.
//   halving:  for mask = P/2 .. 1: the new rank holds blocks [lo, hi); it exchanges with new rank
//             (nr ^ mask): sends the half it gives away, receives the half it keeps and reduces it.
//             After log2(P) steps new rank nr holds block nr fully reduced; Finalize it.
//   doubling: for mask = 1 .. P/2: send the mask blocks it holds, receive the partner's mask blocks.
//   fold-out: odd r < 2E sends the whole result to r-1.
// Reduce-scatter (n blocks of count each): as above, but the P "groups" are the blocks of the original
//   ranks a new rank stands for (two blocks for a folded pair, one otherwise), partials live in scratch
//   (recv is a single block), and at the end an odd folded rank sends its partner's block to it; each
//   rank copies/receives its own block into recv and finalizes it.
// All-gather: even r < 2E sends its block to r+1; recursive doubling over groups; odd r < 2E sends the
//   whole result back to r-1.
// Every exchange is split into rounds of at most chunkBytes per message.
#include "algorithms/schedule.h"

namespace conflux::sched {
namespace {

struct Rhd {
  PlanBuilder& b;
  int n, r;
  uint32_t elt;
  uint64_t chunk;  // elements
  int pow2 = 1, extra = 0;

  Rhd(PlanBuilder& builder, const PlanParams& p) : b(builder), n(p.nranks), r(p.rank), elt(p.eltSize),
      chunk(chunkElems(p)), pow2(largestPowerOfTwo(n)), extra(n - pow2) {}
  int newRank() const { return r < 2 * extra ? (r % 2 ? r / 2 : -1) : r - extra; }
  int oldRank(int nr) const { return nr < extra ? 2 * nr + 1 : nr + extra; }
  /// First original rank of group g (g in [0, pow2]); group g stands for [first(g), first(g+1)).
  uint64_t groupFirst(int g) const { return g < extra ? 2 * g : g + extra; }

  /// One exchange with `peer`, split into chunked rounds: send [src, +sendBytes); receive into
  /// [dst, +recvBytes), reducing with [red, ...) when `reduce`.
  void exchange(int peer, BufRef src, uint64_t sendBytes, BufRef dst, uint64_t recvBytes, bool reduce,
                BufRef red) {
    const uint64_t cb = chunk * elt;
    const uint64_t rounds = std::max(numChunks(sendBytes, cb), numChunks(recvBytes, cb));
    for (uint64_t j = 0; j < rounds; ++j) {
      b.nextRound();
      const Piece ps = piece(sendBytes, cb, static_cast<int64_t>(j));
      const Piece pr = piece(recvBytes, cb, static_cast<int64_t>(j));
      if (peer >= 0) b.send(peer, at(src, ps.first), ps.n);
      if (reduce) b.recvReduce(peer, at(dst, pr.first), at(red, pr.first), pr.n);
      else b.recv(peer, at(dst, pr.first), pr.n);
    }
  }
  void sendAll(int peer, BufRef src, uint64_t bytes) { exchange(peer, src, bytes, src, 0, false, src); }
  void recvAll(int peer, BufRef dst, uint64_t bytes) { exchange(peer, dst, 0, dst, bytes, false, dst); }
};

/// Recursive halving over P units whose element offsets are unitOff(0..P); the own contribution is at
/// `cur` (updated to `acc` after the first step), partials are reduced into `acc`.
template <typename UnitOff>
void halving(Rhd& h, int nr, UnitOff unitOff, BufRef& cur, BufRef acc) {
  int lo = 0, hi = h.pow2;
  for (int mask = h.pow2 / 2; mask >= 1; mask /= 2) {
    const int mid = lo + mask;
    const bool low = (nr & mask) == 0;
    const int keepLo = low ? lo : mid, keepHi = low ? mid : hi;
    const int giveLo = low ? mid : lo, giveHi = low ? hi : mid;
    const uint64_t give = unitOff(giveLo) * h.elt, keep = unitOff(keepLo) * h.elt;
    h.exchange(h.oldRank(nr ^ mask), at(cur, give), (unitOff(giveHi) - unitOff(giveLo)) * h.elt,
               at(acc, keep), (unitOff(keepHi) - unitOff(keepLo)) * h.elt, true, at(cur, keep));
    cur = acc;
    lo = keepLo;
    hi = keepHi;
  }
}

/// Recursive doubling in `buf` over P units; new rank nr starts holding unit nr.
template <typename UnitOff>
void doubling(Rhd& h, int nr, UnitOff unitOff, BufRef buf) {
  for (int mask = 1; mask < h.pow2; mask *= 2) {
    const int partner = nr ^ mask;
    const int mine = nr & ~(mask - 1), theirs = partner & ~(mask - 1);
    h.exchange(h.oldRank(partner), at(buf, unitOff(mine) * h.elt),
               (unitOff(mine + mask) - unitOff(mine)) * h.elt, at(buf, unitOff(theirs) * h.elt),
               (unitOff(theirs + mask) - unitOff(theirs)) * h.elt, false, buf);
  }
}

void allReduce(Rhd& h, uint64_t count) {
  const uint64_t bytes = count * h.elt;
  const Blocks blocks{count, static_cast<uint64_t>(h.pow2)};
  auto unitOff = [&](int u) { return blocks.off(u); };
  const bool folded = h.r < 2 * h.extra;
  BufRef cur = BufRef::send(0);
  if (folded && h.r % 2 == 0) {
    h.sendAll(h.r + 1, BufRef::send(0), bytes);
    h.recvAll(h.r + 1, BufRef::recv(0), bytes);
    return;
  }
  if (folded) {
    h.exchange(h.r - 1, cur, 0, BufRef::recv(0), bytes, true, cur);
    cur = BufRef::recv(0);
  }
  const int nr = h.newRank();
  halving(h, nr, unitOff, cur, BufRef::recv(0));
  h.b.nextRound();
  h.b.finalize(BufRef::recv(blocks.off(nr) * h.elt), blocks.len(nr) * h.elt);
  doubling(h, nr, unitOff, BufRef::recv(0));
  if (folded) h.sendAll(h.r - 1, BufRef::recv(0), bytes);
}

void reduceScatter(Rhd& h, uint64_t count) {
  const uint64_t block = count * h.elt, total = block * h.n;
  auto unitOff = [&](int g) { return h.groupFirst(g) * count; };
  const bool folded = h.r < 2 * h.extra;
  if (folded && h.r % 2 == 0) {
    h.sendAll(h.r + 1, BufRef::send(0), total);
    h.recvAll(h.r + 1, BufRef::recv(0), block);
    h.b.nextRound();
    h.b.finalize(BufRef::recv(0), block);
    return;
  }
  h.b.needScratch(total);
  BufRef cur = BufRef::send(0);
  if (folded) {
    h.exchange(h.r - 1, cur, 0, BufRef::scratch(0), total, true, cur);
    cur = BufRef::scratch(0);
  }
  halving(h, h.newRank(), unitOff, cur, BufRef::scratch(0));
  // cur now holds this rank's group: its own block (and the even partner's block when folded).
  const BufRef own = at(cur, h.r * block);
  if (folded) {
    h.sendAll(h.r - 1, at(cur, (h.r - 1) * block), block);
  } else {
    h.b.nextRound();
  }
  h.b.copy(BufRef::recv(0), own, block);
  h.b.nextRound();
  h.b.finalize(BufRef::recv(0), block);
}

void allGather(Rhd& h, uint64_t count) {
  const uint64_t block = count * h.elt, total = block * h.n;
  auto unitOff = [&](int g) { return h.groupFirst(g) * count; };
  const bool folded = h.r < 2 * h.extra;
  if (folded && h.r % 2 == 0) {
    h.sendAll(h.r + 1, BufRef::send(0), block);
    h.recvAll(h.r + 1, BufRef::recv(0), total);
    return;
  }
  if (folded) h.recvAll(h.r - 1, BufRef::recv((h.r - 1) * block), block);
  else h.b.nextRound();
  h.b.copy(BufRef::recv(h.r * block), BufRef::send(0), block);
  doubling(h, h.newRank(), unitOff, BufRef::recv(0));
  if (folded) h.sendAll(h.r - 1, BufRef::recv(0), total);
}

}  // namespace

Plan buildRecHalvingDoubling(const PlanParams& p) {
  PlanBuilder b("rhd");
  if (p.nranks == 1) {
    singleRank(b, p);
    return b.finish();
  }
  Rhd h(b, p);
  switch (p.coll) {
    case Collective::AllReduce: allReduce(h, p.count); break;
    case Collective::ReduceScatter: reduceScatter(h, p.count); break;
    case Collective::AllGather: allGather(h, p.count); break;
    default: unsupported("rhd", p.coll);
  }
  return b.finish();
}

}  // namespace conflux::sched
