// Two-shot direct all-reduce over peer-visible staging (all ranks on one node).
//
// The staging area is used as two halves; the vector is cut into chunks that fit in a half, chunk k
// living in half k & 1, and each chunk is cut into n slices (uneven: the first get one extra element).
// Rank r owns slice r. Per chunk k:
//   A_k: Barrier (everybody staged chunk k); rank r reduces slice r of all n staged chunks into slice r
//        of its OWN staging (in place: the destination is one of the sources); it also stages chunk
//        k + 1 into the other half, whose previous reads (chunk k - 1's copy-out) happened before this
//        Barrier.
//   F_k: Finalize of its slice, in place in its staging.
//   B_k: Barrier (every slice is reduced and finalized); every rank copies every slice of chunk k from
//        its owner's staging into recv.
// Round 0 stages chunk 0. Staging half h is rewritten (stage(k + 2) in A_{k+1}) only after the
// Barrier that follows every peer's copy-out of chunk k (B_k), and in A_k a rank writes only its own
// slice of its own staging while peers read their own slices, so no bytes are shared within an epoch.
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
  auto stage = [&](uint64_t k) {
    const Piece pc = piece(p.count, ce, static_cast<int64_t>(k));
    b.copy(halfOf(-1, k), BufRef::send(pc.first * e), pc.n * e);
  };
  stage(0);
  for (uint64_t k = 0; k < chunks; ++k) {
    const Piece pc = piece(p.count, ce, static_cast<int64_t>(k));
    const Blocks slices{pc.n, static_cast<uint64_t>(n)};
    const uint64_t mineOff = slices.off(r) * e, mineBytes = slices.len(r) * e;
    b.nextRound();  // A_k
    b.barrier();
    std::vector<BufRef> srcs;
    for (int q = 0; q < n; ++q) srcs.push_back(at(halfOf(q, k), mineOff));
    b.reduce(at(halfOf(-1, k), mineOff), srcs, mineBytes);
    if (k + 1 < chunks) stage(k + 1);
    b.nextRound();  // F_k
    b.finalize(at(halfOf(-1, k), mineOff), mineBytes);
    b.nextRound();  // B_k
    b.barrier();
    for (int q = 0; q < n; ++q) {
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
