// Internal helpers shared by the algorithm files (not part of the library's interface).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/plan.h"

namespace conflux::sched {

/// ceil(a / b) without overflow (b may be near UINT64_MAX: "unchunked" chunk sizes).
inline uint64_t ceilDiv(uint64_t a, uint64_t b) { return a == 0 ? 0 : (a - 1) / b + 1; }
inline int mod(int a, int n) { return ((a % n) + n) % n; }
/// The largest power of two <= n (1 for n <= 1).
inline int largestPowerOfTwo(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

/// The exchanges of a recursive halving-doubling of radix up to `maxRadix` (rec_halving_doubling.cc):
/// P ranks take part (the others fold into a partner first), numbered in the mixed radix `radices`
/// (their product is P; the halving's order, the doubling runs them backwards).
struct RadixSchedule {
  int P = 1;
  std::vector<int> radices;
};
/// maxRadix <= 2: P is the largest power of two <= n, every radix 2 (the classic schedule). Larger: the P
/// from that power of two up to n (so a larger radix never folds more ranks than radix 2) with the fewest
/// rounds, each step one round each way and a fold two more; on a tie the larger P. Radices largest
/// first (radix_schedule.cc; cached per (n, maxRadix)).
RadixSchedule radixSchedule(int n, int maxRadix);

/// `count` elements split into `parts` contiguous blocks; the first count % parts get one extra.
struct Blocks {
  uint64_t count = 0;
  uint64_t parts = 1;
  uint64_t len(uint64_t i) const { return count / parts + (i < count % parts ? 1 : 0); }
  uint64_t off(uint64_t i) const { return i * (count / parts) + std::min<uint64_t>(i, count % parts); }
  uint64_t maxLen() const { return count / parts + (count % parts ? 1 : 0); }
};

/// `ref` moved forward by `bytes`.
inline BufRef at(BufRef ref, uint64_t bytes) {
  ref.offset += bytes;
  return ref;
}

/// Elements per pipelining chunk (at least 1; chunkBytes 0 means unchunked).
inline uint64_t chunkElems(const PlanParams& p) {
  if (p.chunkBytes == 0) return std::numeric_limits<uint64_t>::max() / 2;
  return std::max<uint64_t>(1, p.chunkBytes / p.eltSize);
}

/// Number of chunks of `chunk` elements in `len` elements.
inline uint64_t numChunks(uint64_t len, uint64_t chunk) { return ceilDiv(len, chunk); }

/// Elements [first, first + n) of chunk `c` of a `len`-element range (n is 0 past the end).
struct Piece {
  uint64_t first = 0;
  uint64_t n = 0;
};
inline Piece piece(uint64_t len, uint64_t chunk, int64_t c) {
  if (c < 0) return {};
  const uint64_t first = static_cast<uint64_t>(c) * chunk;
  if (first >= len) return {};
  return {first, std::min(chunk, len - first)};
}

inline bool isReduction(Collective c) {
  return c == Collective::AllReduce || c == Collective::Reduce || c == Collective::ReduceScatter;
}

/// One rank: copy the input to the output (skipped by the executor when in place), then finalize.
inline void singleRank(PlanBuilder& b, const PlanParams& p) {
  const uint64_t bytes = p.count * p.eltSize;
  b.copy(BufRef::recv(0), BufRef::send(0), bytes);
  if (isReduction(p.coll)) {
    b.nextRound();
    b.finalize(BufRef::recv(0), bytes);
  }
}

/// Throws Error(InvalidArgument) "<algo> does not support <collective>".
[[noreturn]] void unsupported(const std::string& algo, Collective c);

/// The double binary tree over m members (double_binary_tree.cc), for the cost model: whom each member
/// sends a chunk to in one round of the pipelined all-reduce (its parents and children in both trees),
/// and how many rounds one chunk takes from the leaves to the roots and back down (the pipeline's fill).
struct DbtreeFacts {
  std::vector<std::vector<int>> sendsTo;
  int fillRounds = 0;
};
DbtreeFacts dbtreeFacts(int m);

/// A common clock for the plans of a group of ranks (round_alignment.cc): tick[v][r] is the tick of rank
/// v's round r, rising with r, equal at both ends of every message; span = the last tick + 1.
struct RoundClock {
  std::vector<std::vector<int>> tick;
  int span = 0;
};
/// The earliest such clock for `plans` (plans[v] is rank v's, peers are indices into `plans`), or nothing
/// when lock-step rounds cannot meet every message (a cycle) or messages do not pair up.
std::optional<RoundClock> alignRounds(const std::vector<Plan>& plans);

// Per-algorithm entry points; each switches on p.coll and calls unsupported() for the others.
Plan buildRing(const PlanParams& p);
Plan buildRecHalvingDoubling(const PlanParams& p);
Plan buildBinomialTree(const PlanParams& p);
Plan buildDoubleBinaryTree(const PlanParams& p);
Plan buildOneShot(const PlanParams& p, const std::string& name);
Plan buildTwoShot(const PlanParams& p);
Plan buildPairwise(const PlanParams& p);
Plan buildDirect(const PlanParams& p);
/// `inner`: the inter-node all-reduce of phase B (Ring, or any algorithm building all-reduce plans).
Plan buildHierarchical(const PlanParams& p, Algo inner);
/// Whether p.layout gives the hierarchical algorithms a uniform multi-node layout of p.nranks ranks.
bool hierarchicalApplies(const PlanParams& p);
/// Hierarchical all-gather, reduce-scatter or broadcast (hierarchical_collectives.cc) for the rank at
/// (node, local) of a layout where hierarchicalApplies().
Plan buildHierarchicalCollective(const PlanParams& p, int node, int local);

}  // namespace conflux::sched
