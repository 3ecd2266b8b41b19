// Pairwise-exchange all-to-all.
//
// Round 0 copies the rank's own block (send block r -> recv block r). Then n-1 steps: in step k
// (1 <= k < n) rank r sends its send block (r+k) mod n to rank r+k and receives recv block (r-k) mod n
// from rank r-k. Rank r+k is in the same step receiving from (r+k)-k = r, so every message is matched
// within its step and the schedule cannot deadlock; every pair exchanges exactly once per direction.
// A block larger than chunkBytes is moved in several rounds of one piece each. The own-block copy
// shares the first round (it touches neither the block sent nor the block received there).
#include "algorithms/schedule.h"

namespace conflux::sched {

Plan buildPairwise(const PlanParams& p) {
  if (p.coll != Collective::AllToAll) unsupported("pairwise", p.coll);
  PlanBuilder b("pairwise");
  const int n = p.nranks, r = p.rank;
  const uint64_t blockBytes = p.count * p.eltSize;
  const uint64_t chunk = chunkElems(p), rounds = numChunks(p.count, chunk);
  b.copy(BufRef::recv(r * blockBytes), BufRef::send(r * blockBytes), blockBytes);
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n), from = mod(r - k, n);
    for (uint64_t j = 0; j < rounds; ++j) {
      const Piece pc = piece(p.count, chunk, static_cast<int64_t>(j));
      b.send(to, BufRef::send(to * blockBytes + pc.first * p.eltSize), pc.n * p.eltSize);
      b.recv(from, BufRef::recv(from * blockBytes + pc.first * p.eltSize), pc.n * p.eltSize);
      b.nextRound();
    }
  }
  return b.finish();
}

}  // namespace conflux::sched
