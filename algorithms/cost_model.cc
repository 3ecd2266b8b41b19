// Cost formulas per algorithm; the derivations are in docs/cost-model.md. Notation: S bytes, n ranks,
// N nodes, L ranks per node (ranks of a node are assumed contiguous, as launchers place them), c the
// chunk. A transfer of b bytes costs alpha + b * share / bandwidth of its link class, where share is how
// many ranks of the node drive the same NIC at that moment (k ranks over R NICs: k / min(k, R)).
#include "algorithms/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "algorithms/schedule.h"
#include "core/error.h"

namespace conflux {
namespace {

struct Model {
  const CostShape& sh;
  const CostParams& p;
  double S;

  bool multiNode() const { return sh.nodes > 1; }
  /// Per-NIC bandwidth multiplier of a rank's transfer when k ranks of its node cross at once: with at
  /// least one NIC per rank, a rank stripes over its own R/L NICs (share L/R); with fewer, the k active
  /// ranks spread over the R NICs (share ceil(k/R)).
  double share(int k) const { return nicShare(k, sh.ranksPerNode, p.nicsPerNode); }
  double chunk() const { return double(std::max<uint64_t>(1, p.chunkBytes)); }
  /// One step moving b bytes per rank, in pieces of at most a chunk (one alpha each).
  /// Ranks sharing a NIC also queue their messages on it: the latency grows with the share too (but a
  /// rank striping over several NICs is not faster to start).
  double xfer(const LinkCost& l, double b, double share) const {
    const double pieces = std::max(1.0, std::ceil(b / chunk()));
    return pieces * l.alpha * std::max(1.0, share) + b * share / l.bandwidth;
  }
  double intra(double b) const { return xfer(p.intra, b, 1.0); }
  double inter(double b, int k) const { return xfer(p.inter, b, share(k)); }
  double reduce(double b) const { return p.fusedReduce ? 0.0 : b / p.reduceRate; }
  /// A step where some pairs are inside a node and (with several nodes) `k` ranks per node cross.
  double mixed(double b, int k) const { return multiNode() ? std::max(intra(b), inter(b, k)) : intra(b); }

  // ---- ring (ring.cc): the ring crosses between nodes once per node and direction
  double ringAllReduce() const {
    const int n = sh.nranks;
    const double b = S / n;
    return 2.0 * (n - 1) * mixed(b, 1) + (n - 1) * reduce(b);
  }
  double ringReduceScatter() const { return (sh.nranks - 1) * (mixed(S / sh.nranks, 1) + reduce(S / sh.nranks)); }
  double ringAllGather() const { return (sh.nranks - 1) * mixed(S / sh.nranks, 1); }
  double ringBroadcast() const {
    const double c = std::min(S, chunk());
    const double chunks = std::max(1.0, std::ceil(S / chunk()));
    return (chunks + sh.nranks - 2) * mixed(c, 1);
  }
  double ringReduce() const {
    const int n = sh.nranks;
    const double gather = multiNode() ? std::max(intra(S * (sh.ranksPerNode - 1) / n), inter(S * (sh.nodes - 1) / sh.nodes, 1))
                                      : intra(S * (n - 1) / n);
    return ringReduceScatter() + gather;
  }

  // ---- recursive halving/doubling (rec_halving_doubling.cc): steps of radix r (2: the pairwise
  // schedule, halving from distance P/2 down to 1), each sending r - 1 messages at once
  /// The real rank behind new rank nr once the E = n - P extra ranks folded (odd r < 2E stand for their
  /// pair, the others move down by E).
  int rhdReal(int nr, int E) const { return nr < E ? 2 * nr + 1 : nr + E; }
  /// One step (radix r, stride s) as crossings: the most ranks of one node that send to another node in
  /// it (0: every exchange is inside a node), and the most peers on other nodes one rank has. After a
  /// fold, new-rank distances no longer tell: on 3 nodes of 1 rank, new ranks 0 and 1 are ranks 1 and 2,
  /// on two nodes.
  struct StepCrossing {
    int ranks = 0;
    int peers = 0;
  };
  StepCrossing rhdCrossing(int radix, int s, int P, int E) const {
    const int L = std::max(1, sh.ranksPerNode);
    if (!sh.uniform) return {L, radix - 1};  // node boundaries unknown: assume the worst
    std::vector<int> perNode(size_t(sh.nranks / L + 1), 0);
    StepCrossing most;
    for (int nr = 0; nr < P; ++nr) {
      const int a = rhdReal(nr, E), lo = nr - nr % (radix * s), d = (nr - lo) / s;
      int peers = 0;
      for (int j = 0; j < radix; ++j) peers += j != d && a / L != rhdReal(lo + j * s, E) / L ? 1 : 0;
      if (peers == 0) continue;
      most.ranks = std::max(most.ranks, ++perNode[size_t(a / L)]);
      most.peers = std::max(most.peers, peers);
    }
    return most;
  }
  /// alpha's multiplier for m messages to different peers at once (params.extraMessage each after the first).
  double messagesAlpha(int m) const { return 1.0 + std::max(0, m - 1) * p.extraMessage; }
  /// Time of the halving (or doubling) steps, each costed by the busiest node's crossing ranks: a rank's
  /// r - 1 messages of b bytes each go out at once, their latencies overlapping as params.extraMessage says.
  double rhdSteps(bool reducing) const {
    const sched::RadixSchedule rs = sched::radixSchedule(sh.nranks, p.radix);
    const int P = rs.P, E = sh.nranks - P;
    double t = 0;
    int size = P;
    for (const int radix : rs.radices) {
      const int s = size / radix;
      const double b = S * s / P;
      const StepCrossing k = multiNode() ? rhdCrossing(radix, s, P, E) : StepCrossing{};
      const double pieces = std::max(1.0, std::ceil(b / chunk()));
      if (k.ranks > 0) {
        const double nic = share(k.ranks);
        t += pieces * p.inter.alpha * std::max(1.0, nic) * messagesAlpha(k.peers) + k.peers * b * nic / p.inter.bandwidth;
      } else {
        t += pieces * p.intra.alpha * messagesAlpha(radix - 1) + (radix - 1) * b / p.intra.bandwidth;
      }
      if (reducing) t += reduce((radix - 1) * b);
      size = s;
    }
    return t;
  }
  /// One fold (in or out): even r < 2E and r + 1 exchange the whole vector; across nodes when the pair
  /// straddles a node boundary (always with one rank per node).
  double rhdFold() const {
    const int P = sched::radixSchedule(sh.nranks, p.radix).P, E = sh.nranks - P, L = std::max(1, sh.ranksPerNode);
    if (E == 0) return 0.0;
    if (multiNode() && !sh.uniform) return inter(S, L);  // node boundaries unknown: the worst case
    // With L >= 2 a node holds at most one straddling pair; with L = 1 every pair straddles, one per node.
    bool crosses = false;
    for (int r = 0; r < 2 * E && !crosses; r += 2) crosses = multiNode() && r / L != (r + 1) / L;
    return crosses ? inter(S, 1) : intra(S);
  }
  double rhdAllReduce() const {
    const double fold = rhdFold();
    return 2 * fold + reduce(fold > 0 ? S : 0) + rhdSteps(true) + rhdSteps(false);
  }
  double rhdReduceScatter() const { return rhdFold() + rhdSteps(true); }
  double rhdAllGather() const { return rhdFold() + rhdSteps(false); }

  // ---- binomial tree (tree.cc), pipelined: in a round every step is active, each on its own chunk
  int depth() const { return int(std::ceil(std::log2(std::max(1, sh.nranks)))); }
  /// Chunks that leave the busiest node (or, with a NIC per rank, the busiest rank) for another node in
  /// one round of the pipelined broadcast (the reduce's arrivals mirror them). Step k sends v -> v + 2^k
  /// from every v < 2^k, so every rank of the root's node that already has data sends across in each
  /// crossing step: on 2 nodes x 2 ranks both ranks of node 0 cross in step 1, two chunks per round on
  /// its link (measured in namespaces: twice the time of one).
  struct Load {
    double bytes = 0;     ///< multiplier of a chunk's transfer time on the busiest link
    double messages = 0;  ///< latencies paid in a row there (each queued message pays one)
  };
  /// The busiest node's (or, with a NIC per rank or more, the busiest rank's) crossing messages per round
  /// from per-rank counts: k ranks' m messages over R NICs, as share() spreads them.
  template <class CountOf>
  Load busiest(CountOf&& crossingOf) const {
    const int n = sh.nranks, L = std::max(1, sh.ranksPerNode), R = std::max(1, p.nicsPerNode);
    Load worst;
    for (int node = 0; node * L < n; ++node) {
      int nodeSends = 0, rankMost = 0;
      for (int v = node * L; v < std::min(n, (node + 1) * L); ++v) {
        const int sends = crossingOf(v);
        nodeSends += sends;
        rankMost = std::max(rankMost, sends);
      }
      const Load here = R >= L ? Load{rankMost * double(L) / R, double(rankMost)}
                               : Load{std::ceil(double(nodeSends) / R), std::ceil(double(nodeSends) / R)};
      if (here.bytes > worst.bytes) worst = here;
    }
    return worst;
  }
  /// Rank v's sends to other nodes in one round of the pipelined broadcast: step k sends v -> v + 2^k
  /// from every v < 2^k, so every rank of the root's node that already has data sends across in each
  /// crossing step (on 2 nodes x 2 ranks both ranks of node 0 cross in step 1: two chunks per round on
  /// its link, measured twice the time of one). The reduce's arrivals mirror them.
  int treeCrossings(int v) const {
    const int n = sh.nranks, L = std::max(1, sh.ranksPerNode);
    int sends = 0;
    for (int k = 0; (1 << k) < n; ++k) {
      if (v < (1 << k) && v + (1 << k) < n && (v + (1 << k)) / L != v / L) ++sends;
    }
    return sends;
  }
  /// Whether any pair of tree step k is on two nodes.
  bool treeStepCrosses(int k) const {
    const int n = sh.nranks, L = std::max(1, sh.ranksPerNode);
    for (int v = 0; v < (1 << k) && v + (1 << k) < n; ++v) {
      if ((v + (1 << k)) / L != v / L) return true;
    }
    return false;
  }
  double treeRound(double c) const {
    const int d = depth();
    const int local = std::min(d, int(std::ceil(std::log2(std::max(1, sh.ranksPerNode)))));
    const double in = local > 0 ? p.intra.alpha + c * local / p.intra.bandwidth : 0;
    const Load load = multiNode() ? busiest([&](int v) { return treeCrossings(v); }) : Load{};
    const double out = load.bytes > 0 ? p.inter.alpha * std::max(1.0, load.messages) + c * load.bytes / p.inter.bandwidth : 0;
    return std::max({in, out, p.intra.alpha});
  }
  /// A chunk's trip through the levels: level k crosses nodes when one of its pairs does.
  double treeLevels(double c, bool reducing) const {
    double t = 0;
    for (int k = 0; k < depth(); ++k) {
      const bool crosses = multiNode() && treeStepCrosses(k);
      t += (crosses ? inter(c, 1) : intra(c)) + (reducing ? reduce(c) : 0);
    }
    return t;
  }
  /// Pipelined: the first chunk goes through every level, later ones follow a round apart, a round
  /// lasting as long as the root's sends to all its children.
  double treeBroadcast() const {
    const double c = std::min(S, chunk());
    const double chunks = std::max(1.0, std::ceil(S / chunk()));
    return treeLevels(c, false) + (chunks - 1) * treeRound(c);
  }
  double treeReduce() const {
    const double c = std::min(S, chunk());
    const double chunks = std::max(1.0, std::ceil(S / chunk()));
    return treeLevels(c, true) + (chunks - 1) * (treeRound(c) + depth() * reduce(c));
  }
  double treeAllReduce() const { return treeReduce() + treeBroadcast(); }

  // ---- double binary tree (double_binary_tree.cc): each tree carries half; a rank is inner in one tree
  /// Pipelined in chunks of each half: in a round every rank sends one chunk to each tree neighbour it
  /// feeds (double_binary_tree.cc's dbtreeFacts), so the busiest node's link carries that many chunks
  /// per round (on 2 nodes x 2 ranks, four). The fill rounds (up to the roots and back) carry single
  /// chunks that the ranks pass on as they arrive: they cost a latency each, not a round of bandwidth
  /// (measured on 2 x 2 ranks at 1 MiB, one chunk per half: 8.7 ms, where charging full rounds said 39).
  double dbtreeAllReduce() const {
    const int n = sh.nranks, L = std::max(1, sh.ranksPerNode);
    const sched::DbtreeFacts f = sched::dbtreeFacts(n);
    const auto crossing = [&](int v) {
      int cross = 0;
      for (int to : f.sendsTo[size_t(v)]) cross += to / L != v / L ? 1 : 0;
      return cross;
    };
    size_t localMost = 0;
    for (int v = 0; v < n; ++v) localMost = std::max(localMost, f.sendsTo[size_t(v)].size() - size_t(multiNode() ? crossing(v) : 0));
    const Load load = multiNode() ? busiest(crossing) : Load{};
    const double half = S / 2;
    const double c = std::min(half, chunk());
    const double chunks = std::max(1.0, std::ceil(half / chunk()));
    const double local = (p.intra.alpha + c / p.intra.bandwidth) * double(std::max<size_t>(1, localMost));
    const double net = load.bytes > 0 ? p.inter.alpha * std::max(1.0, load.messages) + c * load.bytes / p.inter.bandwidth : 0;
    const double fillAlpha = multiNode() ? p.inter.alpha : p.intra.alpha;
    return chunks * std::max(local, net) + (f.fillRounds - 1) * fillAlpha + reduce(S);
  }
  double dbtreeRooted() const { return dbtreeAllReduce() / 2; }

  // ---- hierarchical (hierarchical.cc): segments of L chunks, each starting one round after the previous
  // one (for every inner algorithm: their plans are aligned, round_alignment.cc). A segment spends L-1
  // rounds in phase A (a shard to the next local rank), B rounds in phase B (between nodes), L-1 in phase
  // C and one in F. The rounds are summed one by one as the executor runs them, in lock-step: a round
  // costs a latency (the network's when it has an inter-node step) plus the slower of its link classes'
  // bytes, the bytes of every segment that is in that phase then. So the pipeline's fill and drain, where
  // only the local rank ring works (1 GiB on p5-like nodes with 4 MiB chunks: 7 rounds of up to 7 shards
  // at each end, about 0.5 ms of 6), count as they run. That is the executor with a window of one round
  // (the default); with more, see the dataflow branch below.
  /// `innerRounds`: rounds of the inter-node phase of one segment; `innerBytes`: bytes a rank sends in it
  /// for the whole vector (its shard of every segment), spread evenly over those rounds; `innerAlpha`:
  /// the network latencies one of those rounds pays (several messages at once pay more than one).
  double hierarchical(double innerRounds, double innerBytes, double innerAlpha = 1) const {
    const int L = sh.ranksPerNode;
    const int64_t segments = int64_t(std::max(1.0, std::ceil(S / (chunk() * L))));
    const int64_t A = L - 1, B = std::max<int64_t>(1, int64_t(innerRounds)), T = 2 * A + B + 1;
    const double shard = S / double(segments) / L;            // one A or C step of one segment
    const double innerStep = innerBytes / double(segments) / double(B);  // one B round of one segment
    const double netAlpha = std::max(p.inter.alpha * std::max(1.0, share(L)) * innerAlpha, p.intra.alpha);
    // Segments in a phase that occupies rounds [from, from + len) of each segment, at global round g.
    const auto active = [&](int64_t g, int64_t from, int64_t len) {
      const int64_t lo = std::max<int64_t>(0, g - from - len + 1), hi = std::min(segments - 1, g - from);
      return double(std::max<int64_t>(0, hi - lo + 1));
    };
    const auto round = [&](int64_t g) {
      const double local = (active(g, 0, A) + active(g, A + B, A)) * shard;
      const double net = active(g, A, B) * innerStep;
      const double alpha = net > 0 ? netAlpha : (local > 0 ? p.intra.alpha : 0.0);
      return alpha + std::max(local / p.intra.bandwidth, net * share(L) / p.inter.bandwidth);
    };
    if (p.windowRounds > 1) {
      // The dataflow executor: a segment's steps follow one another as their inputs arrive, so latency is
      // paid along one segment's path (the fill). Later segments follow one per step time: the busier
      // link class's bytes of all segments in flight (one per step of the phase; messages to a node-mate
      // keep plan order, so no more are in flight than lock-step has), or one step's own latency and
      // bytes when that is longer (the latency-bound case, where running ahead gains nothing), or the
      // window's (W rounds open at once).
      const double netStep = innerStep * share(L) / p.inter.bandwidth, localStep = shard / p.intra.bandwidth;
      const double fill = 2.0 * double(A) * (p.intra.alpha + localStep) + double(B) * (netAlpha + netStep) + p.intra.alpha;
      const double pace = std::max({2.0 * double(A) * localStep, double(B) * netStep, netAlpha + netStep,
                                    A > 0 ? p.intra.alpha + localStep : 0.0,
                                    round(std::min(T, segments - 1)) / p.windowRounds});
      return fill + double(segments - 1) * pace + reduce((L - 1.0) / L * S + innerBytes / 2);
    }
    // Round by round (lock-step): rounds T .. segments - 2 (when there are any) all hold every phase
    // full: one of them, times their number; the fill before and the drain after, one by one.
    const int64_t total = segments + T - 1;
    double t = 0;
    if (segments - 1 > T) {
      for (int64_t g = 0; g < T; ++g) t += round(g);
      t += double(segments - 1 - T) * round(T);
      for (int64_t g = segments - 1; g < total; ++g) t += round(g);
    } else {
      for (int64_t g = 0; g < total; ++g) t += round(g);
    }
    return t + reduce((L - 1.0) / L * S + innerBytes / 2);
  }
  double hierAllReduce() const {
    const int N = sh.nodes, L = sh.ranksPerNode;
    return hierarchical(2.0 * (N - 1), 2.0 * (N - 1) / N * S / L);
  }
  /// With N not a power of two a folded pair's survivor also receives the shard at the fold-in and sends
  /// it back at the fold-out: a shard more each way. Segments overlap, so one segment's fold-out shares
  /// a round with a later one's fold-in in the other direction (measured on 3 x 1: 1.5x the ring's time,
  /// where counting both folds one way predicted 2.2x). A radix r step sends r - 1 messages at once: its
  /// rounds pay alpha x messagesAlpha(r - 1) (the mean over the phase's rounds).
  double hierRhdAllReduce() const {
    const int N = sh.nodes, L = sh.ranksPerNode;
    const sched::RadixSchedule rs = sched::radixSchedule(N, p.radix);
    const int P = rs.P;
    const bool folds = P != N;
    const double steps = double(rs.radices.size());
    const double rounds = 2.0 * steps + (folds ? 2 : 0);
    double alphas = folds ? 2 : 0;
    for (const int radix : rs.radices) alphas += 2 * messagesAlpha(radix - 1);
    const double bytes = 2.0 * (P - 1) / P * S / L + (folds ? S / L : 0);
    return hierarchical(rounds, bytes, alphas / rounds);
  }

  /// Phase B by the double binary tree between the N nodes (double_binary_tree.cc): per segment its
  /// shard goes up and down both trees, one half each, in the pipeline's fill rounds; a node sends a half
  /// shard to each tree neighbour it feeds (its parent going up, its children coming down). On 2 nodes
  /// that is one shard per node, as much as the ring (measured: the same time as hier); the old count of
  /// two shards held from 4 nodes on.
  double hierDbtreeAllReduce() const {
    const int N = sh.nodes, L = sh.ranksPerNode;
    const sched::DbtreeFacts f = sched::dbtreeFacts(N);
    size_t most = 0;
    for (const auto& to : f.sendsTo) most = std::max(most, to.size());
    return hierarchical(double(f.fillRounds), double(most) / 2 * S / L);
  }

  // ---- hierarchical all-gather, reduce-scatter, broadcast (hierarchical_collectives.cc): phases in turn.
  // All-gather and reduce-scatter: S is the n-block side; every local rank crosses at once with one
  // block per step, then the node exchanges sets of N blocks.
  double hierAllGather() const {
    const int N = sh.nodes, L = sh.ranksPerNode;
    const double blk = S / sh.nranks;
    return (N - 1) * inter(blk, L) + (L - 1) * intra(N * blk);
  }
  double hierReduceScatter() const {
    const int N = sh.nodes, L = sh.ranksPerNode;
    const double blk = S / sh.nranks;
    return (L - 1) * (intra(N * blk) + reduce(N * blk)) + (N - 1) * (inter(blk, L) + reduce(blk));
  }
  /// The root scatters L shards in its node, L chains (one per local index) carry them between nodes,
  /// every node all-gathers them.
  double hierBroadcast() const {
    const int N = sh.nodes, L = sh.ranksPerNode;
    const double shard = S / L;
    const double c = std::min(shard, chunk());
    const double chunks = std::max(1.0, std::ceil(shard / chunk()));
    const double scatter = L > 1 ? intra((L - 1) * shard) : 0;
    return scatter + (chunks + N - 2) * inter(c, L) + (L - 1) * intra(shard);
  }

  // ---- pairwise all-to-all (pairwise.cc)
  double pairwise() const { return (sh.nranks - 1) * mixed(S / sh.nranks, sh.ranksPerNode); }
};

}  // namespace

double nicShare(int k, int ranksPerNode, int nicsPerNode) {
  const int R = std::max(1, nicsPerNode), L = std::max(1, ranksPerNode);
  if (R >= L) return double(L) / R;
  return std::ceil(double(std::max(1, k)) / R);
}

LoadedNic nicBandwidthUnderLoad(const std::vector<double>& secondsPerRound, double bytesPerRound, double alpha,
                                const NodeLayout& layout, int nicsPerNode) {
  size_t ranksPerNode = 1;
  for (const auto& node : layout.nodes) ranksPerNode = std::max(ranksPerNode, node.size());
  LoadedNic slowest;
  for (const auto& node : layout.nodes) {
    int crossing = 0;
    double round = 0;
    for (int r : node) {
      const double mine = size_t(r) < secondsPerRound.size() ? secondsPerRound[size_t(r)] : 0;
      if (mine <= 0) continue;
      round = std::max(round, mine);
      ++crossing;
    }
    if (crossing == 0) continue;
    const double share = nicShare(crossing, int(ranksPerNode), nicsPerNode);
    const double transfer = std::max(round - alpha * std::max(1.0, share), round / 2);
    const double rate = bytesPerRound / transfer;
    if (slowest.bandwidth == 0 || rate * share < slowest.bandwidth) slowest = {rate * share, rate, share};
  }
  return slowest;
}

double predictSeconds(Algo a, Collective c, uint64_t bytes, const CostShape& shape, const CostParams& params) {
  if (shape.nranks < 1 || !algoSupports(a, c, shape.nranks)) return -1;
  if (shape.nranks == 1) return params.intra.alpha;
  const Model m{shape, params, double(bytes)};
  using C = Collective;
  switch (a) {
    case Algo::Ring:
      switch (c) {
        case C::AllReduce: return m.ringAllReduce();
        case C::ReduceScatter: return m.ringReduceScatter();
        case C::AllGather: return m.ringAllGather();
        case C::Broadcast: return m.ringBroadcast();
        case C::Reduce: return m.ringReduce();
        default: return -1;
      }
    case Algo::RecHalvingDoubling:
      switch (c) {
        case C::AllReduce: return m.rhdAllReduce();
        case C::ReduceScatter: return m.rhdReduceScatter();
        case C::AllGather: return m.rhdAllGather();
        default: return -1;
      }
    case Algo::BinomialTree:
      switch (c) {
        case C::AllReduce: return m.treeAllReduce();
        case C::Broadcast: return m.treeBroadcast();
        case C::Reduce: return m.treeReduce();
        default: return -1;
      }
    case Algo::DoubleBinaryTree:
      switch (c) {
        case C::AllReduce: return m.dbtreeAllReduce();
        case C::Broadcast:
        case C::Reduce: return m.dbtreeRooted();
        default: return -1;
      }
    case Algo::Hierarchical:
      if (shape.nodes < 2 || !shape.uniform) return -1;
      switch (c) {
        case C::AllReduce: return m.hierAllReduce();
        case C::AllGather: return m.hierAllGather();
        case C::ReduceScatter: return m.hierReduceScatter();
        case C::Broadcast: return m.hierBroadcast();
        default: return -1;
      }
    case Algo::HierarchicalRhd:
      if (c != C::AllReduce || shape.nodes < 2 || !shape.uniform) return -1;
      return m.hierRhdAllReduce();
    case Algo::HierarchicalDbtree:
      if (c != C::AllReduce || shape.nodes < 2 || !shape.uniform) return -1;
      return m.hierDbtreeAllReduce();
    case Algo::Pairwise:
      return c == C::AllToAll ? m.pairwise() : -1;
    case Algo::OneShot:
    case Algo::TwoShot:
    case Algo::Direct:
    case Algo::Eager:
    case Algo::IpcOneShot:
    case Algo::IpcTwoShot:
    case Algo::Ipc:
      return -1;  // one node only: chosen by measured rules (selector.cc)
  }
  return -1;
}

namespace {
/// `a`'s predicted time at its bestChunk (chunkBytes 0: at params.chunkBytes); seconds < 0 without a formula.
CostedAlgo costAtBestChunk(Algo a, Collective c, uint64_t bytes, const CostShape& shape, const CostParams& params) {
  CostedAlgo at{a, predictSeconds(a, c, bytes, shape, params), 0};
  if (!params.chooseChunk || !isHierarchical(a) || c != Collective::AllReduce || at.seconds < 0) return at;
  CostParams q = params;
  for (uint64_t chunk = kMinChosenChunk; chunk <= kMaxChosenChunk; chunk *= 2) {
    q.chunkBytes = chunk;
    const double t = predictSeconds(a, c, bytes, shape, q);
    if (at.chunkBytes == 0 || t < at.seconds) at = {a, t, chunk};
  }
  return at;
}
}  // namespace

uint64_t bestChunk(Algo a, Collective c, uint64_t bytes, const CostShape& shape, const CostParams& params) {
  return costAtBestChunk(a, c, bytes, shape, params).chunkBytes;
}

CostedAlgo bestSettings(Algo a, Collective c, uint64_t bytes, const CostShape& shape, const CostParams& params) {
  const bool radixApplies = a == Algo::RecHalvingDoubling || a == Algo::HierarchicalRhd;
  if (!params.chooseRadix || !radixApplies) return costAtBestChunk(a, c, bytes, shape, params);
  // hier_rhd's radix applies between the nodes (one rank of each per shard), flat rhd's among all ranks.
  const int n = a == Algo::HierarchicalRhd ? shape.nodes : shape.nranks;
  CostParams q = params;
  q.radix = 2;
  CostedAlgo best = costAtBestChunk(a, c, bytes, shape, q);
  if (best.seconds < 0) return best;
  best.radix = 2;
  if (n < 3) return best;  // radix 2 is the only one
  sched::RadixSchedule last = sched::radixSchedule(n, 2);
  for (int r = 3; r <= std::min(params.radix, n); ++r) {
    const sched::RadixSchedule rs = sched::radixSchedule(n, r);
    if (rs.P == last.P && rs.radices == last.radices) continue;  // the same plan as a smaller radix's
    last = rs;
    q.radix = r;
    CostedAlgo at = costAtBestChunk(a, c, bytes, shape, q);
    if (at.seconds >= 0 && at.seconds < best.seconds * (1 - kTieMargin)) {
      best = at;
      best.radix = r;
    }
  }
  return best;
}

std::string chunkText(uint64_t bytes) {
  return bytes >= (1 << 20) ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes >> 10) + " KiB";
}

std::vector<CostedAlgo> rankAlgorithms(Collective c, uint64_t bytes, const CostShape& shape, const CostParams& params) {
  std::vector<CostedAlgo> out;
  for (Algo a : algosFor(c)) {
    if (const CostedAlgo at = bestSettings(a, c, bytes, shape, params); at.seconds >= 0) out.push_back(at);
  }
  std::stable_sort(out.begin(), out.end(), [](const CostedAlgo& x, const CostedAlgo& y) { return x.seconds < y.seconds; });
  // A tie: candidates within kTieMargin of the cheapest are beyond what the model can tell apart; the one
  // listed first in the registry (ring before rhd, hier before hier_rhd) goes first. In namespaces (4 nodes
  // x 1 rank, 16-256 MiB) ring, rhd, hier and hier_rhd were predicted within 0.2% of each other and the
  // rhd ones measured 6-14% slower than the ring ones: their rounds exchange with a different peer each.
  if (!out.empty()) {
    const double limit = out.front().seconds * (1 + kTieMargin);
    auto winner = out.begin();
    for (auto it = out.begin(); it != out.end() && it->seconds <= limit; ++it) {
      if (static_cast<int>(it->algo) < static_cast<int>(winner->algo)) winner = it;
    }
    std::rotate(out.begin(), winner, winner + 1);
  }
  return out;
}

std::string describeCandidates(const std::vector<CostedAlgo>& ranked, size_t limit) {
  std::string s;
  for (size_t i = 0; i < ranked.size() && i < limit; ++i) {
    char buf[64];
    const double t = ranked[i].seconds;
    if (t < 1e-3) std::snprintf(buf, sizeof buf, "%.1f us", t * 1e6);
    else if (t < 1) std::snprintf(buf, sizeof buf, "%.2f ms", t * 1e3);
    else std::snprintf(buf, sizeof buf, "%.2f s", t);
    s += (i ? " < " : "") + std::string(algoName(ranked[i].algo)) + " " + buf;
    if (ranked[i].chunkBytes != 0 && ranked[i].radix != 0) {
      s += " (chunk " + chunkText(ranked[i].chunkBytes) + ", radix " + std::to_string(ranked[i].radix) + ")";
    } else if (ranked[i].chunkBytes != 0) {
      s += " (chunk " + chunkText(ranked[i].chunkBytes) + ")";
    } else if (ranked[i].radix != 0) {
      s += " (radix " + std::to_string(ranked[i].radix) + ")";
    }
  }
  return s;
}

std::string formatCostText(const CostParams& params) {
  // %.17g: the numbers read back to within a rounding (the file's units differ), so a prediction from the
  // file is the communicator's.
  const auto line = [](const char* key, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s=%.17g\n", key, v);
    return std::string(buf);
  };
  return "# cost model parameters (source: " + params.source + "; chunk " + std::to_string(params.chunkBytes) +
         (params.chooseChunk ? " bytes, hierarchical all-reduce chunks chosen per call)\n" : " bytes)\n") + line("intra_alpha_us", params.intra.alpha * 1e6) +
         line("intra_gbytes_per_s", params.intra.bandwidth / 1e9) + line("inter_alpha_us", params.inter.alpha * 1e6) +
         line("inter_gbytes_per_s", params.inter.bandwidth / 1e9) + line("reduce_gbytes_per_s", params.reduceRate / 1e9) +
         "nics_per_node=" + std::to_string(params.nicsPerNode) + "\n" + line("extra_message", params.extraMessage);
}

void loadCostFile(const std::string& path, CostParams& params) {
  std::ifstream in(path);
  if (!in) throw Error(Code::InvalidArgument, "CONFLUX_COST_FILE: cannot read '" + path + "'");
  parseCostText(in, path, params);
}

void parseCostText(std::istream& in, const std::string& path, CostParams& params) {
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string item;
    if (!(words >> item)) continue;
    auto bad = [&](const std::string& why) {
      throw Error(Code::InvalidArgument, "CONFLUX_COST_FILE " + path + ":" + std::to_string(lineNo) + ": " + why);
    };
    const auto eq = item.find('=');
    if (eq == std::string::npos) bad("expected key=value, got '" + item + "'");
    const std::string key = item.substr(0, eq);
    double v = 0;
    try {
      size_t used = 0;
      v = std::stod(item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1) throw std::invalid_argument(key);
    } catch (const std::exception&) {
      bad("'" + key + "' needs a number");
    }
    if (key == "extra_message") {  // 0 is a value here: latencies that overlap completely
      if (!(v >= 0 && v <= 1)) bad("'extra_message' must be a number from 0 to 1");
      params.extraMessage = v;
      continue;
    }
    if (!(v > 0) || !std::isfinite(v)) bad("'" + key + "' must be a finite number > 0");
    if (key == "intra_alpha_us") params.intra.alpha = v * 1e-6;
    else if (key == "intra_gbytes_per_s") params.intra.bandwidth = v * 1e9;
    else if (key == "inter_alpha_us") params.inter.alpha = v * 1e-6;
    else if (key == "inter_gbytes_per_s") params.inter.bandwidth = v * 1e9;
    else if (key == "reduce_gbytes_per_s") params.reduceRate = v * 1e9;
    else if (key == "nics_per_node") {
      if (v != std::floor(v) || v > 4096) bad("'nics_per_node' must be a whole number from 1 to 4096");
      params.nicsPerNode = int(v);
    }
    else bad("unknown key '" + key + "'");
  }
  params.source = path;
}

}  // namespace conflux
