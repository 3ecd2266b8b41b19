// Direct algorithms over peers' own buffers (every rank's send and recv buffers mapped by every peer,
// e.g. allocated with cfxMemAlloc): nothing is staged, every byte moves once.
//
// Every plan is Barrier, work, Barrier (plan.h rule 6): after the first Barrier all inputs are ready and
// all outputs writable; the last one keeps every rank in the call until no peer touches its buffers.
// The work, for rank r of n (blocks and slices as in schedule.h's Blocks):
//   AllReduce      rank r owns slice r of the vector: one ReduceSpread per piece of kPieceBytes (or
//                  chunkBytes if smaller), a round each, reducing that piece of slice r of all n send
//                  buffers and writing the finished piece into slice r of its own recv and of every
//                  peer's. Large out of place, the executor streams each piece to all n destinations
//                  in one pass (non-temporal stores: 2 reads and 2 writes per element on 2 ranks, the
//                  least traffic there is); otherwise it reduces the piece into its recv and copies it
//                  out while it is still in cache (in place with plain stores: the destinations are
//                  sources it has just read).
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

uint64_t pieceBytesOf(const PlanParams& p) {
  const uint64_t limit = p.chunkBytes > 0 ? std::min(kPieceBytes, p.chunkBytes) : kPieceBytes;
  return std::max<uint64_t>(limit / p.eltSize * p.eltSize, p.eltSize);
}

/// Every rank's send at `off`, this rank's own first: the executor scales a PreMulSum input only among
/// the first 64 sources (with rank order, rank 64 and up went unscaled).
std::vector<BufRef> sourcesAt(const PlanParams& p, uint64_t off) {
  std::vector<BufRef> srcs{BufRef::send(off)};
  for (int q = 0; q < p.nranks; ++q) {
    if (q != p.rank) srcs.push_back(BufRef::peerSend(q, off));
  }
  return srcs;
}

/// Emits the pieces of recv[outOff, outOff + len) = reduce over q of send_q[srcOff, srcOff + len), each
/// finalized in the round after its reduction (so that it is still in cache). All offsets in bytes.
void reducePieces(PlanBuilder& b, const PlanParams& p, uint64_t srcOff, uint64_t outOff, uint64_t len) {
  const uint64_t pieceBytes = pieceBytesOf(p), pieces = numChunks(len, pieceBytes);
  for (uint64_t j = 0; j <= pieces; ++j) {
    b.nextRound();
    if (j < pieces) {
      const uint64_t off = j * pieceBytes;
      b.reduce(BufRef::recv(outOff + off), sourcesAt(p, srcOff + off), std::min(pieceBytes, len - off));
    }
    if (j >= 1) {
      const uint64_t off = (j - 1) * pieceBytes;
      b.finalize(BufRef::recv(outOff + off), std::min(pieceBytes, len - off));
    }
  }
}

/// All-reduce: every piece of slice [off, off + len), finished, into this rank's recv and every peer's.
void spreadPieces(PlanBuilder& b, const PlanParams& p, uint64_t off, uint64_t len) {
  const uint64_t pieceBytes = pieceBytesOf(p);
  for (uint64_t at = off; at < off + len; at += pieceBytes) {
    b.nextRound();
    std::vector<BufRef> peers;
    for (int q = 0; q < p.nranks; ++q) {
      if (q != p.rank) peers.push_back(BufRef::peerRecv(q, at));
    }
    b.reduceSpread(BufRef::recv(at), peers, sourcesAt(p, at), std::min(pieceBytes, off + len - at));
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
      if (len > 0) spreadPieces(b, p, off, len);
      break;
    }
    case Collective::Reduce:
      if (r == p.root) reducePieces(b, p, 0, 0, block);
      break;
    case Collective::ReduceScatter: reducePieces(b, p, static_cast<uint64_t>(r) * block, 0, block); break;
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
