// Recursive halving / doubling (Rabenseifner), of radix 2 or more.
//
// The P "new ranks" that run the exchanges are numbered in a mixed radix: P = r_1 x ... x r_m, each
// radix r_i between 2 and PlanParams::radix (radixSchedule in schedule.h; radix 2: P is the largest
// power of two <= n, every r_i = 2). E = n - P ("extra" ranks): ranks r < 2E pair up (r even with r+1):
// the even rank folds its data into its odd partner and sits out; the odd one continues as "new rank"
// r/2. Ranks r >= 2E continue as new rank r - E. The P new ranks then run:
//
// All-reduce (vector cut into P blocks):
//   fold-in:  even r < 2E sends its whole input to r+1, which reduces it into recv.
//   halving:  step i (radix r_i, stride s_i = r_{i+1} x ... x r_m): the new rank holds blocks [lo, lo +
//             r_i s_i); cut into r_i parts of s_i blocks, it keeps part d (its digit, (nr - lo) / s_i) and
//             exchanges with the r_i - 1 new ranks nr + (j - d) s_i: it sends them part j and receives
//             their part d. Radix 2 receives and reduces in one RecvReduce; a larger radix receives
//             the r_i - 1 copies into scratch and reduces them with its own in one Reduce of r_i
//             sources, in the same round (a round's local operations follow its messages, plan.h).
//             After m steps new rank nr holds block nr fully reduced; Finalize it.
//   doubling: the steps in reverse: it sends the s_i blocks it holds to the r_i - 1 peers of step i and
//             receives theirs.
//   fold-out: odd r < 2E sends the whole result to r-1.
// A larger radix takes fewer steps (log_k P instead of log2 P latencies each way) for the same bytes:
// (P-1)/P of the vector each way, each step's share of it sent to r_i - 1 peers at once.
// Reduce-scatter (n blocks of count each): as above, but the P "groups" are the blocks of the original
//   ranks a new rank stands for (two blocks for a folded pair, one otherwise), partials live in scratch
//   (recv is a single block), and at the end an odd folded rank sends its partner's block to it; each
//   rank copies/receives its own block into recv and finalizes it.
// All-gather: even r < 2E sends its block to r+1; recursive doubling over groups; odd r < 2E sends the
//   whole result back to r-1.
// Every exchange is split into rounds of at most chunkBytes per message; within a step of a larger radix
// the received pieces alternate between two sets of scratch slots from round to round, so that a window
// of rounds (CONFLUX_EXEC_WINDOW) can receive the next pieces while the last ones are reduced.
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "core/error.h"

namespace conflux::sched {
namespace {

struct Rhd {
  PlanBuilder& b;
  int n, r;
  uint32_t elt;
  uint64_t chunk;  // elements
  RadixSchedule sched;
  int P = 1, extra = 0;
  /// Where a larger radix's received pieces go: scratch from this offset on (after what the collective
  /// keeps in scratch itself).
  uint64_t slotBase = 0;

  Rhd(PlanBuilder& builder, const PlanParams& p) : b(builder), n(p.nranks), r(p.rank), elt(p.eltSize),
      chunk(chunkElems(p)), sched(radixSchedule(p.nranks, p.radix)), P(sched.P), extra(n - sched.P) {}
  int newRank() const { return r < 2 * extra ? (r % 2 ? r / 2 : -1) : r - extra; }
  int oldRank(int nr) const { return nr < extra ? 2 * nr + 1 : nr + extra; }
  /// First original rank of group g (g in [0, P]); group g stands for [first(g), first(g+1)).
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

  /// One step with several peers, split into chunked rounds: to each part's peer send [src, +sendBytes)
  /// and receive recvBytes. Without `reduce` the receive goes to [dst, ...) (the doubling); with it,
  /// every part receives the same range (their copies of what this rank keeps) into scratch slots, and
  /// one Reduce per round folds them, with [red, ...), into [into, ...) (the halving).
  struct Part {
    int peer;
    BufRef src;
    uint64_t sendBytes;
    BufRef dst;
    uint64_t recvBytes;
  };
  void exchangeMany(const std::vector<Part>& parts, bool reduce, BufRef into, BufRef red) {
    const uint64_t cb = chunk * elt;
    uint64_t rounds = 0, most = 0;
    for (const Part& pt : parts) {
      rounds = std::max({rounds, numChunks(pt.sendBytes, cb), numChunks(pt.recvBytes, cb)});
      most = std::max(most, pt.recvBytes);
    }
    const uint64_t slot = std::min(cb, most), sets = rounds > 1 ? 2 : 1;
    if (reduce) b.needScratch(slotBase + sets * parts.size() * slot);
    for (uint64_t q = 0; q < rounds; ++q) {
      b.nextRound();
      std::vector<BufRef> srcs;
      uint64_t reduced = 0, from = 0;
      for (size_t j = 0; j < parts.size(); ++j) {
        const Part& pt = parts[j];
        const Piece ps = piece(pt.sendBytes, cb, static_cast<int64_t>(q));
        const Piece pr = piece(pt.recvBytes, cb, static_cast<int64_t>(q));
        b.send(pt.peer, at(pt.src, ps.first), ps.n);
        if (!reduce) {
          b.recv(pt.peer, at(pt.dst, pr.first), pr.n);
          continue;
        }
        const BufRef slotRef = BufRef::scratch(slotBase + ((q % sets) * parts.size() + j) * slot);
        b.recv(pt.peer, slotRef, pr.n);
        if (srcs.empty()) srcs.push_back(at(red, pr.first));
        srcs.push_back(slotRef);
        reduced = pr.n;
        from = pr.first;
      }
      if (reduced > 0) b.reduce(at(into, from), srcs, reduced);
    }
  }
};

/// Recursive halving over P units whose element offsets are unitOff(0..P); the own contribution is at
/// `cur` (updated to `acc` after the first step), partials are reduced into `acc`.
template <typename UnitOff>
void halving(Rhd& h, int nr, UnitOff unitOff, BufRef& cur, BufRef acc) {
  int lo = 0, size = h.P;
  for (const int radix : h.sched.radices) {
    const int s = size / radix, d = (nr - lo) / s;
    auto bytesOf = [&](int j) { return (unitOff(lo + (j + 1) * s) - unitOff(lo + j * s)) * h.elt; };
    auto offOf = [&](int j) { return unitOff(lo + j * s) * h.elt; };
    if (radix == 2) {
      const int j = 1 - d;
      h.exchange(h.oldRank(nr + (j - d) * s), at(cur, offOf(j)), bytesOf(j), at(acc, offOf(d)), bytesOf(d), true,
                 at(cur, offOf(d)));
    } else {
      std::vector<Rhd::Part> parts;
      for (int j = 0; j < radix; ++j) {
        if (j != d) parts.push_back({h.oldRank(nr + (j - d) * s), at(cur, offOf(j)), bytesOf(j), acc, bytesOf(d)});
      }
      h.exchangeMany(parts, true, at(acc, offOf(d)), at(cur, offOf(d)));
    }
    cur = acc;
    lo += d * s;
    size = s;
  }
}

/// Recursive doubling in `buf` over P units; new rank nr starts holding unit nr.
template <typename UnitOff>
void doubling(Rhd& h, int nr, UnitOff unitOff, BufRef buf) {
  int s = 1;
  for (auto it = h.sched.radices.rbegin(); it != h.sched.radices.rend(); ++it) {
    const int radix = *it, lo = nr - nr % (radix * s), d = (nr - lo) / s;
    auto bytesOf = [&](int j) { return (unitOff(lo + (j + 1) * s) - unitOff(lo + j * s)) * h.elt; };
    auto bufOf = [&](int j) { return at(buf, unitOff(lo + j * s) * h.elt); };
    if (radix == 2) {
      const int j = 1 - d;
      h.exchange(h.oldRank(nr + (j - d) * s), bufOf(d), bytesOf(d), bufOf(j), bytesOf(j), false, buf);
    } else {
      std::vector<Rhd::Part> parts;
      for (int j = 0; j < radix; ++j) {
        if (j != d) parts.push_back({h.oldRank(nr + (j - d) * s), bufOf(d), bytesOf(d), bufOf(j), bytesOf(j)});
      }
      h.exchangeMany(parts, false, buf, buf);
    }
    s *= radix;
  }
}

void allReduce(Rhd& h, uint64_t count) {
  const uint64_t bytes = count * h.elt;
  const Blocks blocks{count, static_cast<uint64_t>(h.P)};
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
  h.slotBase = total;  // partials in scratch [0, total), a larger radix's received pieces after them
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
  if (p.radix < 2 || p.radix > kMaxRhdRadix) {
    throw Error(Code::InvalidArgument, "rhd: radix " + std::to_string(p.radix) + " is not 2 to " +
                                           std::to_string(kMaxRhdRadix));
  }
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
