// Two-shot direct all-reduce over peer-visible staging (all ranks on one node).
//
// The staging area is used as two halves; the vector is cut into chunks that fit in a half, chunk k
// living in half k & 1, and each chunk is cut into n slices (uneven: the first get one extra element).
// Rank r owns slice r. Staging chunk k copies only the slices the peers reduce (all but slice r): rank
// r reads its own slice straight from send. Per chunk k:
//   A_k: Barrier (everybody staged chunk k); rank r reduces slice r of its send and of the n - 1 peers'
//        staged chunks (finished: divided for avg) into slice r of its own staging, which stage() left
//        untouched and no peer reads before B_k, and into slice r of its recv (one ReduceSpread: the
//        executor reduces into staging, then copies to recv from cache, streaming when the call
//        streams to recv: large, or a cold receive buffer);
//        it also stages chunk k + 1 into the other half, whose previous reads (chunk k - 1's copy-out)
//        happened before this Barrier.
//   B_k: Barrier (every slice is reduced and published); every rank copies every other slice of chunk
//        k from its owner's staging into recv.
// So the reduction writes staging, which stays in cache, and recv is written only by copies out of it.
// Round 0 stages chunk 0. Staging half h, last read by the copy-outs of chunk k (B_k), is rewritten
// only after the next Barrier, A_{k+1}'s: by stage(k + 2) in A_{k+1} and by the reduction of chunk
// k + 2 in A_{k+2}. Slice r of a rank's staging is written only in A_k and read by peers only after
// B_k's Barrier, and peers read their own slices in A_k, so between two Barriers no byte is both
// written and read by different ranks.
// Reduce-scatter and all-gather use the one-shot schedules (one_shot.cc) under the name "twoshot".
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "core/error.h"

namespace conflux::sched {
namespace {

void allReduce(PlanBuilder& b, const PlanParams& p) {
  const uint32_t e = p.eltSize;
  const int n = p.nranks, r = p.rank;
  const uint64_t half = p.stagingBytes / 2 / e * e;
  if (half < e) {
    throw Error(Code::InvalidArgument, "twoshot allreduce: stagingBytes " + std::to_string(p.stagingBytes) +
                                           " too small, needs at least " + std::to_string(2 * e));
  }
  const uint64_t ce = half / e, chunks = numChunks(p.count, ce);
  b.needStaging(chunks > 1 ? half + ce * e : p.count * e);
  auto halfOf = [&](int owner, uint64_t k) { return BufRef::staging(owner, (k & 1) * half); };
  // Stage only the slices the peers reduce: this rank reads its own slice straight from send.
  auto stage = [&](uint64_t k) {
    const Piece pc = piece(p.count, ce, static_cast<int64_t>(k));
    const Blocks slices{pc.n, static_cast<uint64_t>(n)};
    const uint64_t mineOff = slices.off(r), mineEnd = mineOff + slices.len(r);
    if (mineOff > 0) b.copy(halfOf(-1, k), BufRef::send(pc.first * e), mineOff * e);
    if (mineEnd < pc.n) {
      b.copy(at(halfOf(-1, k), mineEnd * e), BufRef::send((pc.first + mineEnd) * e), (pc.n - mineEnd) * e);
    }
  };
  stage(0);
  for (uint64_t k = 0; k < chunks; ++k) {
    const Piece pc = piece(p.count, ce, static_cast<int64_t>(k));
    const Blocks slices{pc.n, static_cast<uint64_t>(n)};
    const uint64_t mineOff = slices.off(r) * e, mineBytes = slices.len(r) * e;
    const BufRef mine = at(halfOf(-1, k), mineOff), mineOut = BufRef::recv(pc.first * e + mineOff);
    b.nextRound();  // A_k
    b.barrier();
    std::vector<BufRef> srcs{BufRef::send(pc.first * e + mineOff)};
    for (int q = 0; q < n; ++q) {
      if (q != r) srcs.push_back(at(halfOf(q, k), mineOff));
    }
    b.reduceSpread(mine, {mineOut}, srcs, mineBytes);
    if (k + 1 < chunks) stage(k + 1);
    b.nextRound();  // B_k
    b.barrier();
    for (int q = 0; q < n; ++q) {
      if (q == r) continue;
      b.copy(BufRef::recv((pc.first + slices.off(q)) * e), at(halfOf(q, k), slices.off(q) * e),
             slices.len(q) * e);
    }
  }
}

}  // namespace

Plan buildTwoShot(const PlanParams& p) {
  if (p.coll == Collective::ReduceScatter || p.coll == Collective::AllGather) return buildOneShot(p, "twoshot");
  if (p.coll != Collective::AllReduce) unsupported("twoshot", p.coll);
  PlanBuilder b("twoshot");
  if (p.nranks == 1 || p.count == 0) {
    if (p.count > 0) singleRank(b, p);
    return b.finish();
  }
  allReduce(b, p);
  return b.finish();
}

}  // namespace conflux::sched
