// One-shot direct algorithms over peer-visible staging (all ranks on one node).
//
// The staging area (PlanParams::stagingBytes per rank) is used as two halves of H bytes. The data is
// cut into chunks that fit in a half; chunk k lives in half k & 1. Per chunk:
//   stage(k):   each rank copies its part of chunk k from its send buffer into its own staging half;
//   Barrier k:  everybody's chunk k is staged;
//   consume(k): each rank reads what it needs of chunk k directly from the peers' staging halves;
//   post(k):    Finalize of the reduced chunk (a separate round: it rewrites what consume(k) wrote).
// The rounds are
//   round 0:     stage(0)
//   round k + 1: Barrier k; consume(k), stage(k + 1), post(k - 1)
//   last round:  post(C - 1)
// so ONE Barrier per chunk suffices: stage(k + 1) rewrites the half that chunk k - 1 used, and every
// peer finished consume(k - 1) before arriving at Barrier k. Between calls the executor alternates
// between two staging areas, so a plan need not end with a Barrier.
//
// Per collective (send-side staging layout in brackets):
//   AllReduce      [chunk of the vector]      each rank reduces all n staged chunks into recv.
//   Reduce         [chunk of the vector]      only the root reduces (and finalizes).
//   Broadcast      [chunk, root only]         every non-root copies the root's chunk into recv.
//   AllGather      [chunk of the own block]   each rank copies every peer's chunk into recv, and its own
//                                             from send (in place: nothing to copy).
//   ReduceScatter  [chunk k of all n blocks]  each rank reduces its block's piece from all ranks.
//   AllToAll       [chunk k of all n blocks]  each rank copies its block's piece from every rank.
//   (For both, a rank stages only the peers' blocks and reads its own piece from send.)
// For ReduceScatter and AllToAll chunk k is the element range [k*ce, (k+1)*ce) of every block, laid
// out block after block, so a half must hold at least n elements.
#include <functional>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "core/error.h"

namespace conflux::sched {
namespace {

struct Staged {
  PlanBuilder& b;
  const PlanParams& p;
  uint64_t half;      // bytes per half
  uint64_t ce;        // elements per chunk (of the vector, or of each block)
  uint64_t len;       // elements to chunk
  uint64_t chunks;
  BufRef halfOf(int owner, uint64_t k) const { return BufRef::staging(owner, (k & 1) * half); }
  Piece pieceOf(uint64_t k) const { return piece(len, ce, static_cast<int64_t>(k)); }
};

/// Emits the round structure described above.
void pipeline(Staged& s, const std::function<void(uint64_t)>& stage,
              const std::function<void(uint64_t)>& consume, const std::function<void(uint64_t)>& post) {
  stage(0);
  for (uint64_t k = 0; k < s.chunks; ++k) {
    s.b.nextRound();
    s.b.barrier();
    consume(k);
    if (k + 1 < s.chunks) stage(k + 1);
    if (k >= 1 && post) post(k - 1);
  }
  s.b.nextRound();
  if (post) post(s.chunks - 1);
}

void build(Staged& s) {
  const PlanParams& p = s.p;
  const uint32_t e = p.eltSize;
  const int n = p.nranks, r = p.rank;
  const bool isRoot = r == p.root;
  const uint64_t blockBytes = p.count * e;
  // Stage the vector chunk k (AllReduce, Reduce, Broadcast's root, AllGather's own block).
  auto stageVector = [&](uint64_t k) {
    const Piece pc = s.pieceOf(k);
    s.b.copy(s.halfOf(-1, k), BufRef::send(pc.first * e), pc.n * e);
  };
  // Stage piece k of every peer's block (ReduceScatter, AllToAll): laid out block after block, the own
  // block's place left empty (this rank reads its own piece from send).
  auto stageBlocks = [&](uint64_t k) {
    const Piece pc = s.pieceOf(k);
    if (pc.n == p.count) {  // whole blocks: the ones before the own block and the ones after, two copies
      if (r > 0) s.b.copy(s.halfOf(-1, k), BufRef::send(0), r * blockBytes);
      if (r + 1 < n) {
        const uint64_t after = (r + 1) * blockBytes;
        s.b.copy(at(s.halfOf(-1, k), after), BufRef::send(after), (n - r - 1) * blockBytes);
      }
      return;
    }
    for (int q = 0; q < n; ++q) {
      if (q != r) s.b.copy(at(s.halfOf(-1, k), q * pc.n * e), BufRef::send(q * blockBytes + pc.first * e), pc.n * e);
    }
  };
  // This rank's piece of chunk k of its own block r, in send.
  auto ownPiece = [&](const Piece& pc) { return BufRef::send(r * blockBytes + pc.first * e); };
  // dst = the reduction of the vector chunk k (all ranks' staging at offset 0) or, for ReduceScatter,
  // of block r's piece of chunk k: the own piece from send, first (the executor scales a PreMulSum input
  // only among the first 64 sources), then the peers' from their staging.
  auto reduceFromAll = [&](BufRef dst, uint64_t k, uint64_t offInHalf, uint64_t bytes, bool ownFromSend) {
    std::vector<BufRef> srcs;
    if (ownFromSend) srcs.push_back(ownPiece(s.pieceOf(k)));
    for (int q = 0; q < n; ++q) {
      if (q != r || !ownFromSend) srcs.push_back(at(s.halfOf(q, k), offInHalf));
    }
    s.b.reduce(dst, srcs, bytes);
  };
  auto finalizeVector = [&](uint64_t k) {
    const Piece pc = s.pieceOf(k);
    s.b.finalize(BufRef::recv(pc.first * e), pc.n * e);
  };
  switch (p.coll) {
    case Collective::AllReduce:
    case Collective::Reduce: {
      const bool reduces = p.coll == Collective::AllReduce || isRoot;
      pipeline(s, stageVector,
               [&](uint64_t k) {
                 const Piece pc = s.pieceOf(k);
                 if (reduces) reduceFromAll(BufRef::recv(pc.first * e), k, 0, pc.n * e, false);
               },
               [&](uint64_t k) {
                 if (reduces) finalizeVector(k);
               });
      break;
    }
    case Collective::Broadcast:
      if (isRoot) s.b.copy(BufRef::recv(0), BufRef::send(0), blockBytes);
      pipeline(s, [&](uint64_t k) { if (isRoot) stageVector(k); },
               [&](uint64_t k) {
                 const Piece pc = s.pieceOf(k);
                 if (!isRoot) s.b.copy(BufRef::recv(pc.first * e), s.halfOf(p.root, k), pc.n * e);
               },
               nullptr);
      break;
    case Collective::AllGather:
      // The own piece comes from the send buffer (staged in the round before, so in cache), not back from
      // staging: in place that copy has the same source and destination and costs nothing.
      pipeline(s, stageVector,
               [&](uint64_t k) {
                 const Piece pc = s.pieceOf(k);
                 s.b.copy(BufRef::recv(r * blockBytes + pc.first * e), BufRef::send(pc.first * e), pc.n * e);
                 for (int q = 0; q < n; ++q) {
                   if (q != r) s.b.copy(BufRef::recv(q * blockBytes + pc.first * e), s.halfOf(q, k), pc.n * e);
                 }
               },
               nullptr);
      break;
    case Collective::ReduceScatter:
      pipeline(s, stageBlocks,
               [&](uint64_t k) {
                 const Piece pc = s.pieceOf(k);
                 reduceFromAll(BufRef::recv(pc.first * e), k, r * pc.n * e, pc.n * e, true);
               },
               finalizeVector);
      break;
    case Collective::AllToAll:
      pipeline(s, stageBlocks,
               [&](uint64_t k) {
                 const Piece pc = s.pieceOf(k);
                 s.b.copy(BufRef::recv(r * blockBytes + pc.first * e), ownPiece(pc), pc.n * e);
                 for (int q = 0; q < n; ++q) {
                   if (q == r) continue;
                   s.b.copy(BufRef::recv(q * blockBytes + pc.first * e), at(s.halfOf(q, k), r * pc.n * e),
                            pc.n * e);
                 }
               },
               nullptr);
      break;
    default: break;  // SendRecv is rejected by buildOneShot
  }
}

}  // namespace

Plan buildOneShot(const PlanParams& p, const std::string& name) {
  PlanBuilder b(name);
  if (p.coll == Collective::SendRecv) unsupported(name, p.coll);
  if (p.nranks == 1 || p.count == 0) {
    if (p.count > 0) singleRank(b, p);
    return b.finish();
  }
  const bool perBlock = p.coll == Collective::ReduceScatter || p.coll == Collective::AllToAll;
  const uint64_t half = p.stagingBytes / 2 / p.eltSize * p.eltSize;
  const uint64_t unit = perBlock ? static_cast<uint64_t>(p.nranks) * p.eltSize : p.eltSize;
  if (half < unit) {
    throw Error(Code::InvalidArgument,
                name + " " + std::string(collectiveName(p.coll)) + ": stagingBytes " +
                    std::to_string(p.stagingBytes) + " too small, needs at least " + std::to_string(2 * unit));
  }
  const uint64_t ce = half / unit;
  Staged s{b, p, half, ce, p.count, numChunks(p.count, ce)};
  const uint64_t chunkBytes = std::min(p.count, ce) * unit;
  b.needStaging(s.chunks > 1 ? half + chunkBytes : chunkBytes);
  build(s);
  return b.finish();
}

}  // namespace conflux::sched
