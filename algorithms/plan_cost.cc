// A plan's predicted time from its own rounds (plan_cost.h).
//
// Per round of each rank's plan (the slowest rank's sum is the plan's time: a rank's rounds do not show
// its waits, so this is a lower bound where schedules are not in lockstep):
//   - communication: per link class (a peer on the same node: intra; on another: inter) and direction,
//     messages * alpha * max(1, share) + bytes * share / bandwidth; directions, classes and barriers (one
//     intra alpha each) overlap: the slowest counts. `share` is the NIC sharing of cost_model.cc, with
//     k = the ranks of this node that cross in the same direction in the same round of their own plans
//     (exact for schedules whose ranks move in lockstep: ring, rhd, the hierarchical ones);
//   - then RecvReduce's reductions and the local operations, one after another: a Copy moves bytes at
//     the intra bandwidth (skipped when source and destination are the same place), a Reduce of k
//     sources costs k-1 two-input reductions.
#include "algorithms/plan_cost.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "algorithms/algorithms.h"

namespace conflux {
namespace {

/// Per global rank, its node's number (all 0 without a layout).
std::vector<int> nodeOfRank(const PlanParams& p) {
  std::vector<int> node(static_cast<size_t>(std::max(1, p.nranks)), 0);
  if (p.layout == nullptr) return node;
  for (size_t k = 0; k < p.layout->nodes.size(); ++k) {
    for (int r : p.layout->nodes[k]) {
      if (r >= 0 && r < p.nranks) node[r] = static_cast<int>(k);
    }
  }
  return node;
}

/// Whether `round` of `rank`'s plan sends (out) or receives (!out) a message to or from another node.
bool crosses(const Round& round, const Plan& plan, const std::vector<int>& node, int rank, bool out) {
  for (uint32_t i = 0; i < round.numOps; ++i) {
    const Op& op = plan.ops[round.firstOp + i];
    if (op.kind == OpKind::Barrier || !isCommOp(op.kind) || node[op.peer] == node[rank]) continue;
    if ((op.kind == OpKind::Send) == out) return true;
  }
  return false;
}

struct Direction {
  double bytes = 0;
  int messages = 0;
};

struct LinkLoad {
  Direction out, in;
  bool used() const { return out.messages + in.messages > 0; }
  /// The busier direction, each with its own NIC share.
  double seconds(const LinkCost& l, double outShare, double inShare) const {
    auto one = [&](const Direction& d, double share) {
      return d.messages == 0 ? 0.0 : d.messages * l.alpha * std::max(1.0, share) + d.bytes * share / l.bandwidth;
    };
    return std::max(one(out, outShare), one(in, inShare));
  }
};

bool samePlace(const BufRef& a, const BufRef& b) { return a.kind == b.kind && a.rank == b.rank && a.offset == b.offset; }

}  // namespace

namespace {

/// Per round index, the ranks of one node sending to (receiving from) another node in that round of
/// their plans. The NIC is full duplex, so each direction shares only with its own kind.
struct Crossing {
  std::vector<int> out, in;
  int ranks = 0;  ///< the node's ranks
};

/// One rank's rounds, each as long as its slowest communication plus its local work.
double rankSeconds(const Plan& plan, int rank, const std::vector<int>& node, const Crossing& cross,
                   const CostParams& params) {
  auto share = [&](int k) { return nicShare(k, cross.ranks, params.nicsPerNode); };
  const double reduceRate = params.fusedReduce ? 0.0 : 1.0 / params.reduceRate;  // seconds per byte
  double total = 0;
  for (size_t r = 0; r < plan.rounds.size(); ++r) {
    const Round& round = plan.rounds[r];
    LinkLoad intra, inter;
    bool barrier = false;
    double after = 0;  // reductions of received data and the local operations, in order
    for (uint32_t i = 0; i < round.numOps; ++i) {
      const Op& op = plan.ops[round.firstOp + i];
      switch (op.kind) {
        case OpKind::Barrier: barrier = true; break;
        case OpKind::Send:
        case OpKind::Recv:
        case OpKind::RecvReduce: {
          LinkLoad& link = node[op.peer] == node[rank] ? intra : inter;
          Direction& d = op.kind == OpKind::Send ? link.out : link.in;
          d.bytes += double(op.bytes);
          ++d.messages;
          if (op.kind == OpKind::RecvReduce) after += double(op.bytes) * reduceRate;
          break;
        }
        case OpKind::Copy:
          if (!samePlace(op.dst, plan.src(op, 0))) after += double(op.bytes) / params.intra.bandwidth;
          break;
        case OpKind::Reduce: after += double(op.bytes) * (op.nsrc > 0 ? op.nsrc - 1 : 0) * reduceRate; break;
        case OpKind::ReduceSpread:  // costed as a Reduce and a Copy per extra destination
          after += double(op.bytes) * (op.nsrc > 0 ? op.nsrc - 1 : 0) * reduceRate;
          after += double(op.bytes) * op.nextra / params.intra.bandwidth;
          break;
        case OpKind::Finalize: break;
      }
    }
    double comm = barrier ? params.intra.alpha : 0.0;
    if (intra.used()) comm = std::max(comm, intra.seconds(params.intra, 1.0, 1.0));
    if (inter.used()) {
      const bool known = r < cross.out.size();
      comm = std::max(comm, inter.seconds(params.inter, share(known ? cross.out[r] : 1), share(known ? cross.in[r] : 1)));
    }
    total += comm + after;
  }
  return total;
}

}  // namespace

double planSeconds(Algo algo, const PlanParams& p, const CostParams& params) {
  if (algoEngine(algo) != Engine::Plan || !algoSupports(algo, p.coll, p.nranks)) return -1;
  const std::vector<int> node = nodeOfRank(p);
  std::vector<Plan> plans;
  plans.reserve(p.nranks);
  for (int r = 0; r < p.nranks; ++r) {
    PlanParams q = p;
    q.rank = r;
    plans.push_back(buildPlan(algo, q));
  }
  const int numNodes = 1 + *std::max_element(node.begin(), node.end());
  std::vector<Crossing> cross(numNodes);
  for (int r = 0; r < p.nranks; ++r) {
    Crossing& c = cross[node[r]];
    ++c.ranks;
    if (numNodes == 1) continue;
    const Plan& plan = plans[r];
    if (c.out.size() < plan.rounds.size()) {
      c.out.resize(plan.rounds.size(), 0);
      c.in.resize(plan.rounds.size(), 0);
    }
    for (size_t i = 0; i < plan.rounds.size(); ++i) {
      c.out[i] += crosses(plan.rounds[i], plan, node, r, true) ? 1 : 0;
      c.in[i] += crosses(plan.rounds[i], plan, node, r, false) ? 1 : 0;
    }
  }
  double slowest = 0;
  for (int r = 0; r < p.nranks; ++r) slowest = std::max(slowest, rankSeconds(plans[r], r, node, cross[node[r]], params));
  return slowest;
}

double eagerSeconds(uint64_t inputBytes, int nranks, const CostParams& params) {
  const double b = double(inputBytes), peers = std::max(0, nranks - 1);
  const double reduce = params.fusedReduce ? 0.0 : peers * b / params.reduceRate;
  return params.intra.alpha + (1 + peers) * b / params.intra.bandwidth + reduce;
}

}  // namespace conflux
