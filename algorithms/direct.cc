// Direct algorithms over peers' own buffers (every rank's send and recv buffers mapped by every peer,
// e.g. allocated with cfxMemAlloc): nothing is staged, every byte moves once.
//
// Every plan is Barrier, work, Barrier (plan.h rule 6): after the first Barrier all inputs are ready and
// all outputs writable; the last one keeps every rank in the call until no peer touches its buffers.
// The work, for rank r of n (blocks and slices as in schedule.h's Blocks):
//   AllReduce      rank r owns slice r of the vector: it reduces slice r of all n send buffers into its
//                  recv, finalizes it and copies it into slice r of every peer's recv. The slice is cut
//                  into pieces of kPieceBytes (or chunkBytes if smaller), pipelined over rounds (reduce
//                  piece j, finalize piece j - 1, copy piece j - 2 out) so that each piece is still in
//                  cache when it is finalized and copied. (The executor writes peers' buffers with
//                  non-temporal stores for large out-of-place calls.)
//   Reduce         the root reduces the n send buffers into its recv piece by piece (and finalizes).
//   ReduceScatter  rank r reduces block r of all n send buffers into its recv (pieces, then finalize).
//   Broadcast      every non-root copies the root's send buffer into its recv.
//   AllGather      rank r copies every rank's send buffer into block q of its recv.
//   AllToAll       rank r copies block r of every rank's send buffer into block q of its recv.
// In place, rank r writes only its own slice or block of anyone's buffers, which no other rank reads.
#include <algorithm>
#include <vector>

#include "algorithms/schedule.h"

namespace conflux::sched {
namespace {

// Reduction granularity: small enough that a piece's inputs and output stay in L2 between stages.
constexpr uint64_t kPieceBytes = 128 << 10;

BufRef sendOf(int q, int r, uint64_t off) { return q == r ? BufRef::send(off) : BufRef::peerSend(q, off); }

/// Emits the pieces of out[0, len) = reduce over q of send_q[srcOff, srcOff + len), each finalized in the
/// next round; with `peers`, each finished piece is copied to the same offset of every peer's recv in
/// the round after that. All offsets in bytes.
void reducePieces(PlanBuilder& b, const PlanParams& p, uint64_t srcOff, uint64_t outOff, uint64_t len, bool peers) {
  const uint64_t limit = p.chunkBytes > 0 ? std::min(kPieceBytes, p.chunkBytes) : kPieceBytes;
  const uint64_t pieceBytes = std::max<uint64_t>(limit / p.eltSize * p.eltSize, p.eltSize);
  const uint64_t pieces = numChunks(len, pieceBytes);
  auto pieceAt = [&](uint64_t j, uint64_t& off, uint64_t& bytes) {
    off = j * pieceBytes;
    bytes = std::min(pieceBytes, len - off);
  };
  for (uint64_t j = 0; j < pieces + 2; ++j) {
    b.nextRound();
    uint64_t off = 0, bytes = 0;
    if (j < pieces) {
      pieceAt(j, off, bytes);
      std::vector<BufRef> srcs;
      for (int q = 0; q < p.nranks; ++q) srcs.push_back(sendOf(q, p.rank, srcOff + off));
      b.reduce(BufRef::recv(outOff + off), srcs, bytes);
    }
    if (j >= 1 && j - 1 < pieces) {
      pieceAt(j - 1, off, bytes);
      b.finalize(BufRef::recv(outOff + off), bytes);
    }
    if (peers && j >= 2) {
      pieceAt(j - 2, off, bytes);
      for (int q = 0; q < p.nranks; ++q) {
        if (q != p.rank) b.copy(BufRef::peerRecv(q, outOff + off), BufRef::recv(outOff + off), bytes);
      }
    }
  }
}

void work(PlanBuilder& b, const PlanParams& p) {
  const uint32_t e = p.eltSize;
  const int n = p.nranks, r = p.rank;
  const uint64_t block = p.count * e;
  switch (p.coll) {
    case Collective::AllReduce: {
      const Blocks slices{p.count, static_cast<uint64_t>(n)};
      const uint64_t off = slices.off(r) * e, len = slices.len(r) * e;
      if (len > 0) reducePieces(b, p, off, off, len, true);
      break;
    }
    case Collective::Reduce:
      if (r == p.root) reducePieces(b, p, 0, 0, block, false);
      break;
    case Collective::ReduceScatter: reducePieces(b, p, static_cast<uint64_t>(r) * block, 0, block, false); break;
    case Collective::Broadcast:
      b.nextRound();
      b.copy(BufRef::recv(0), sendOf(p.root, r, 0), block);
      break;
    case Collective::AllGather:
      b.nextRound();
      for (int q = 0; q < n; ++q) b.copy(BufRef::recv(static_cast<uint64_t>(q) * block), sendOf(q, r, 0), block);
      break;
    case Collective::AllToAll:
      b.nextRound();
      for (int q = 0; q < n; ++q) {
        b.copy(BufRef::recv(static_cast<uint64_t>(q) * block), sendOf(q, r, static_cast<uint64_t>(r) * block), block);
      }
      break;
    case Collective::SendRecv: unsupported("direct", p.coll);
  }
}

}  // namespace

Plan buildDirect(const PlanParams& p) {
  if (p.coll == Collective::SendRecv) unsupported("direct", p.coll);
  PlanBuilder b("direct");
  if (p.count == 0) return b.finish();
  if (p.nranks == 1) {
    singleRank(b, p);
    return b.finish();
  }
  b.barrier();
  work(b, p);
  b.nextRound();
  b.barrier();
  return b.finish();
}

}  // namespace conflux::sched
