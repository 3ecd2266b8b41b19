// The registry of call strategies: names, support matrix, engines, parameter validation and plan dispatch.
#include "algorithms/algorithms.h"

#include <initializer_list>
#include <iterator>
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

using C = Collective;

constexpr uint32_t bits(std::initializer_list<Collective> cs) {
  uint32_t m = 0;
  for (Collective c : cs) m |= 1u << static_cast<unsigned>(c);
  return m;
}
constexpr uint32_t kEveryCollectiveButSendRecv = bits({C::AllReduce, C::Reduce, C::Broadcast, C::AllGather,
                                                       C::ReduceScatter, C::AllToAll});

/// One strategy: everything the library knows of it, in one row (adding a plan algorithm adds a row here
/// and, for the selector across nodes, its cost in cost_model.cc).
struct Entry {
  Algo algo;
  std::string_view name;
  uint32_t collectives;  ///< bit (1 << Collective) per collective it runs
  bool staging;          ///< its plans use peer-visible staging memory (one node only)
  bool peerBuffers;      ///< its plans read and write the peers' own buffers (library-allocated memory)
  Plan (*build)(const PlanParams&);  ///< null for the strategies that run without a plan
  Engine engine = Engine::Plan;
};

// In Algo order (checked below), which is also the order algosFor lists them in.
constexpr Entry kRegistry[] = {
    {Algo::Ring, "ring", bits({C::AllReduce, C::ReduceScatter, C::AllGather, C::Broadcast, C::Reduce}), false, false,
     sched::buildRing},
    {Algo::RecHalvingDoubling, "rhd", bits({C::AllReduce, C::ReduceScatter, C::AllGather}), false, false,
     sched::buildRecHalvingDoubling},
    {Algo::BinomialTree, "tree", bits({C::AllReduce, C::Broadcast, C::Reduce}), false, false,
     sched::buildBinomialTree},
    {Algo::DoubleBinaryTree, "dbtree", bits({C::AllReduce, C::Broadcast, C::Reduce}), false, false,
     sched::buildDoubleBinaryTree},
    {Algo::OneShot, "oneshot", kEveryCollectiveButSendRecv, true, false,
     [](const PlanParams& p) { return sched::buildOneShot(p, "oneshot"); }},
    {Algo::TwoShot, "twoshot", bits({C::AllReduce, C::ReduceScatter, C::AllGather}), true, false,
     sched::buildTwoShot},
    {Algo::Pairwise, "pairwise", bits({C::AllToAll}), false, false, sched::buildPairwise},
    {Algo::Direct, "direct", kEveryCollectiveButSendRecv, false, true, sched::buildDirect},
    {Algo::Hierarchical, "hier", bits({C::AllReduce, C::AllGather, C::ReduceScatter, C::Broadcast}), false, false,
     [](const PlanParams& p) { return sched::buildHierarchical(p, Algo::Ring); }},
    {Algo::HierarchicalRhd, "hier_rhd", bits({C::AllReduce}), false, false,
     [](const PlanParams& p) { return sched::buildHierarchical(p, Algo::RecHalvingDoubling); }},
    {Algo::HierarchicalDbtree, "hier_dbtree", bits({C::AllReduce}), false, false,
     [](const PlanParams& p) { return sched::buildHierarchical(p, Algo::DoubleBinaryTree); }},
    {Algo::Eager, "eager", kEveryCollectiveButSendRecv, false, false, nullptr, Engine::Eager},
    {Algo::IpcOneShot, "ipc_oneshot", bits({C::AllReduce}), false, false, nullptr, Engine::CudaIpc},
    {Algo::IpcTwoShot, "ipc_twoshot", bits({C::AllReduce}), false, false, nullptr, Engine::CudaIpc},
    {Algo::Ipc, "ipc", bits({C::Reduce, C::Broadcast, C::AllGather, C::ReduceScatter, C::AllToAll}), false, false,
     nullptr, Engine::CudaIpc},
};
static_assert(std::size(kRegistry) == kNumAlgos, "one registry row per Algo");

constexpr bool inAlgoOrder() {
  for (size_t i = 0; i < std::size(kRegistry); ++i) {
    if (static_cast<size_t>(kRegistry[i].algo) != i) return false;
  }
  return true;
}
static_assert(inAlgoOrder(), "registry rows in Algo order: entry(a) indexes by the enum");

const Entry* entry(Algo a) {
  const auto i = static_cast<size_t>(a);
  return i < std::size(kRegistry) ? &kRegistry[i] : nullptr;
}

bool supportsCollective(Algo a, Collective c) {
  const Entry* e = entry(a);
  return e != nullptr && c != Collective::SendRecv && (e->collectives >> static_cast<unsigned>(c) & 1u) != 0;
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
  const Entry* e = entry(a);
  return e != nullptr ? e->name : "unknown";
}

std::optional<Algo> parseAlgo(std::string_view name) {
  for (const Entry& e : kRegistry) {
    if (e.name == name) return e.algo;
  }
  return std::nullopt;
}

bool algoSupports(Algo a, Collective c, int nranks) { return nranks >= 1 && supportsCollective(a, c); }

bool isHierarchical(Algo a) {
  return a == Algo::Hierarchical || a == Algo::HierarchicalRhd || a == Algo::HierarchicalDbtree;
}

bool algoUsesStaging(Algo a) {
  const Entry* e = entry(a);
  return e != nullptr && e->staging;
}

bool algoUsesPeerBuffers(Algo a) {
  const Entry* e = entry(a);
  return e != nullptr && e->peerBuffers;
}

Engine algoEngine(Algo a) {
  const Entry* e = entry(a);
  return e != nullptr ? e->engine : Engine::Plan;
}

std::vector<Algo> algosFor(Collective c) {
  std::vector<Algo> out;
  for (const Entry& e : kRegistry) {
    if (e.engine == Engine::Plan && supportsCollective(e.algo, c)) out.push_back(e.algo);
  }
  return out;
}

std::vector<Algo> strategiesFor(Collective c) {
  std::vector<Algo> out;
  for (const Entry& e : kRegistry) {
    if (supportsCollective(e.algo, c)) out.push_back(e.algo);
  }
  return out;
}

Plan buildPlan(Algo a, const PlanParams& p) {
  if (!supportsCollective(a, p.coll)) sched::unsupported(std::string(algoName(a)), p.coll);
  if (entry(a)->build == nullptr) {
    throw Error(Code::InvalidArgument, "'" + std::string(algoName(a)) + "' runs " +
                                           std::string(collectiveName(p.coll)) + " without a plan");
  }
  validate(a, p);
  return entry(a)->build(p);
}

}  // namespace conflux
