// The algorithm registry: names, support matrix, parameter validation and dispatch.
#include "algorithms/algorithms.h"

#include <array>
#include <string>

#include "algorithms/schedule.h"
#include "core/error.h"

namespace conflux {

namespace sched {
void unsupported(const std::string& algo, Collective c) {
  throw Error(Code::InvalidArgument,
              "algorithm '" + algo + "' does not support " + std::string(collectiveName(c)));
}
}  // namespace sched

namespace {

constexpr std::array<Algo, kNumAlgos> kAllAlgos = {
    Algo::Ring,    Algo::RecHalvingDoubling, Algo::BinomialTree, Algo::DoubleBinaryTree,
    Algo::OneShot, Algo::TwoShot,            Algo::Pairwise,     Algo::Direct,
    Algo::Hierarchical, Algo::HierarchicalRhd, Algo::HierarchicalDbtree,
};

bool supportsCollective(Algo a, Collective c) {
  using C = Collective;
  switch (a) {
    case Algo::Ring:
      return c == C::AllReduce || c == C::ReduceScatter || c == C::AllGather || c == C::Broadcast ||
             c == C::Reduce;
    case Algo::RecHalvingDoubling:
    case Algo::TwoShot:
      return c == C::AllReduce || c == C::ReduceScatter || c == C::AllGather;
    case Algo::BinomialTree:
    case Algo::DoubleBinaryTree:
      return c == C::AllReduce || c == C::Broadcast || c == C::Reduce;
    case Algo::OneShot:
    case Algo::Direct:
      return c != C::SendRecv;
    case Algo::Pairwise:
      return c == C::AllToAll;
    case Algo::Hierarchical:
      return c == C::AllReduce || c == C::AllGather || c == C::ReduceScatter || c == C::Broadcast;
    case Algo::HierarchicalRhd:
    case Algo::HierarchicalDbtree:
      return c == C::AllReduce;
  }
  return false;
}

void validate(Algo a, const PlanParams& p) {
  const std::string what = std::string(algoName(a)) + " " + std::string(collectiveName(p.coll));
  auto fail = [&](const std::string& why) { throw Error(Code::InvalidArgument, what + ": " + why); };
  if (p.nranks < 1) fail("nranks must be >= 1 (got " + std::to_string(p.nranks) + ")");
  if (p.rank < 0 || p.rank >= p.nranks) {
    fail("rank " + std::to_string(p.rank) + " out of range [0, " + std::to_string(p.nranks) + ")");
  }
  if (p.eltSize == 0) fail("eltSize must be > 0");
  if ((p.coll == Collective::Reduce || p.coll == Collective::Broadcast) &&
      (p.root < 0 || p.root >= p.nranks)) {
    fail("root " + std::to_string(p.root) + " out of range [0, " + std::to_string(p.nranks) + ")");
  }
}

}  // namespace

std::string_view algoName(Algo a) {
  switch (a) {
    case Algo::Ring: return "ring";
    case Algo::RecHalvingDoubling: return "rhd";
    case Algo::BinomialTree: return "tree";
    case Algo::DoubleBinaryTree: return "dbtree";
    case Algo::OneShot: return "oneshot";
    case Algo::TwoShot: return "twoshot";
    case Algo::Pairwise: return "pairwise";
    case Algo::Direct: return "direct";
    case Algo::Hierarchical: return "hier";
    case Algo::HierarchicalRhd: return "hier_rhd";
    case Algo::HierarchicalDbtree: return "hier_dbtree";
  }
  return "unknown";
}

std::optional<Algo> parseAlgo(std::string_view name) {
  for (Algo a : kAllAlgos) {
    if (algoName(a) == name) return a;
  }
  return std::nullopt;
}

bool algoSupports(Algo a, Collective c, int nranks) { return nranks >= 1 && supportsCollective(a, c); }

bool algoUsesStaging(Algo a) { return a == Algo::OneShot || a == Algo::TwoShot; }

bool algoUsesPeerBuffers(Algo a) { return a == Algo::Direct; }

std::vector<Algo> algosFor(Collective c) {
  std::vector<Algo> out;
  for (Algo a : kAllAlgos) {
    if (supportsCollective(a, c)) out.push_back(a);
  }
  return out;
}

Plan buildPlan(Algo a, const PlanParams& p) {
  if (!supportsCollective(a, p.coll)) sched::unsupported(std::string(algoName(a)), p.coll);
  validate(a, p);
  switch (a) {
    case Algo::Ring: return sched::buildRing(p);
    case Algo::RecHalvingDoubling: return sched::buildRecHalvingDoubling(p);
    case Algo::BinomialTree: return sched::buildBinomialTree(p);
    case Algo::DoubleBinaryTree: return sched::buildDoubleBinaryTree(p);
    case Algo::OneShot: return sched::buildOneShot(p, "oneshot");
    case Algo::TwoShot: return sched::buildTwoShot(p);
    case Algo::Pairwise: return sched::buildPairwise(p);
    case Algo::Direct: return sched::buildDirect(p);
    case Algo::Hierarchical: return sched::buildHierarchical(p, Algo::Ring);
    case Algo::HierarchicalRhd: return sched::buildHierarchical(p, Algo::RecHalvingDoubling);
    case Algo::HierarchicalDbtree: return sched::buildHierarchical(p, Algo::DoubleBinaryTree);
  }
  sched::unsupported(std::string(algoName(a)), p.coll);
}

}  // namespace conflux
