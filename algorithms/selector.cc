#include "algorithms/selector.h"

#include <algorithm>
#include <string_view>

#include "algorithms/plan_cost.h"
#include "core/error.h"

namespace conflux {
namespace {

// Below this many bytes per call the one-shot direct algorithms win: one barrier, every rank reads all
// inputs (latency bound). Above it two-shot splits the reduction work between ranks (bandwidth bound).
constexpr uint64_t kOneShotMaxBytes = 64 * 1024;

std::string human(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof buf, v == static_cast<uint64_t>(v) ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::optional<Collective> parseCollective(std::string_view s) {
  for (int c = 0; c < kNumCollectives; ++c) {
    if (collectiveName(static_cast<Collective>(c)) == s) return static_cast<Collective>(c);
  }
  return std::nullopt;
}

[[noreturn]] void badAlgo(const std::string& spec, const std::string& why) {
  throw Error(Code::InvalidArgument, "CONFLUX_ALGO='" + spec + "': " + why);
}

}  // namespace

Selector::Selector(const std::string& forced) {
  if (forced.empty()) return;
  size_t pos = 0;
  while (pos <= forced.size()) {
    size_t comma = forced.find(',', pos);
    std::string item = forced.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t eq = item.find('=');
    if (eq == std::string::npos) {
      auto a = parseAlgo(item);
      if (!a) badAlgo(forced, "unknown algorithm '" + item + "'");
      forcedAll_ = *a;
    } else {
      auto c = parseCollective(item.substr(0, eq));
      auto a = parseAlgo(item.substr(eq + 1));
      if (!c) badAlgo(forced, "unknown collective '" + item.substr(0, eq) + "'");
      if (!a) badAlgo(forced, "unknown algorithm '" + item.substr(eq + 1) + "'");
      forcedPer_[*c] = *a;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
}

std::optional<Algo> Selector::named(Collective coll) const {
  if (auto it = forcedPer_.find(coll); it != forcedPer_.end()) return it->second;
  return forcedAll_;
}

std::optional<Algo> Selector::forced(Collective coll) const {
  std::optional<Algo> a = named(coll);
  if (a && !algoSupports(*a, coll, 1)) return std::nullopt;
  return a;
}

std::optional<uint64_t> Selector::eagerLimit(Collective coll, uint64_t configured, uint64_t capacity) const {
  const std::optional<Algo> a = forced(coll);
  if (!a) return configured;
  if (*a == Algo::Eager) return capacity;
  return std::nullopt;
}

Selection Selector::explainEager(Collective coll, uint64_t inputBytes, uint64_t limit, const CommShape& shape) const {
  const std::string how = ": eager (each rank publishes its input in a slot, one flag per call, no barrier)";
  if (forced(coll) == Algo::Eager) {
    return {Algo::Eager, "forced by CONFLUX_ALGO (" + human(inputBytes) + " fit a slot of " + std::to_string(limit) +
                             " B)" + how};
  }
  return {Algo::Eager, std::to_string(shape.nranks) + " ranks share memory and " + human(inputBytes) +
                           " per rank <= " + std::to_string(limit) + " B (CONFLUX_EAGER_BYTES)" + how};
}

std::optional<Selection> Selector::selectIpc(Collective coll, uint64_t bytes, const IpcShape& shape,
                                             bool explain) const {
  if (const std::optional<Algo> f = forced(coll)) {
    if (algoEngine(*f) != Engine::CudaIpc) return std::nullopt;
    return Selection{*f, explain ? "forced by CONFLUX_ALGO" : ""};
  }
  if (coll != Collective::AllReduce) {
    return Selection{Algo::Ipc, explain ? std::to_string(shape.nranks) +
                                              " ranks reach each other's device memory: the CUDA-IPC kernel"
                                        : ""};
  }
  // Two ranks: the two-shot moves as many bytes between them as the one-shot, with one synchronisation
  // more, so the one-shot wins at every size (on an H200: 10.5 vs 15.3 us at 1 MiB, 350 vs 323 GB/s busbw
  // at 16 MiB). Ranks sharing one GPU read the same memory either way: the one-shot won there up to
  // 16 MiB too (4 ranks: 70.7 vs 42.6 GB/s at 1 MiB, 235 vs 229 at 16 MiB). Across GPUs the two-shot
  // reads fewer bytes from peers, which pays above CONFLUX_CUDA_ONESHOT_BYTES.
  constexpr uint64_t kOneGpuOneShotBytes = 16 << 20;
  const uint64_t limit = shape.oneGpu ? std::max(shape.oneShotBytes, kOneGpuOneShotBytes) : shape.oneShotBytes;
  const bool oneShot = shape.nranks == 2 || bytes <= limit;
  Selection s{oneShot ? Algo::IpcOneShot : Algo::IpcTwoShot, ""};
  if (!explain) return s;
  if (shape.nranks == 2) {
    s.reason = "2 ranks: the one-shot kernel moves as many bytes as the two-shot with one synchronisation less";
  } else {
    s.reason = std::to_string(shape.nranks) + " ranks" + (shape.oneGpu ? " on one GPU" : "") + " and " +
               human(bytes) + (oneShot ? " <= " : " > ") + human(limit) +
               (shape.oneGpu ? " (one GPU: at least 16 MiB)" : " (CONFLUX_CUDA_ONESHOT_BYTES)") +
               (oneShot ? ": one-shot kernel (every rank reads every input)"
                        : ": two-shot kernel (reduce-scatter, then all-gather)");
  }
  return s;
}

namespace {
/// The larger of a call's buffers, as select() sees it.
uint64_t bufferBytes(const PlanParams& p) {
  const BufferSizes b = bufferSizes(p);
  return std::max(b.send, b.recv);
}

CostShape costShape(const CommShape& shape) {
  CostShape cs;
  cs.nranks = shape.nranks;
  cs.nodes = shape.numNodes;
  cs.ranksPerNode = std::max(1, shape.ranksPerNode > 0 ? shape.ranksPerNode : shape.maxRanksPerNode);
  cs.uniform = shape.ranksPerNode > 0;
  return cs;
}

/// Whether the shape allows plan algorithm `a` at all (staging needs one node, peer buffers need mapped
/// buffers); strategies of other engines never run as plans.
bool shapeAllows(Algo a, const CommShape& shape) {
  if (algoEngine(a) != Engine::Plan) return false;
  // Hierarchical plans need several nodes with the same number of ranks each (else they are a plain ring).
  if (isHierarchical(a) && (shape.numNodes < 2 || shape.ranksPerNode < 1)) {
    return false;
  }
  return (!algoUsesStaging(a) || shape.allLocal) && (!algoUsesPeerBuffers(a) || (shape.allLocal && shape.peerBuffers));
}
}  // namespace

Selection Selector::select(Collective coll, uint64_t bytes, const CommShape& shape) const {
  if (std::optional<Algo> forced = named(coll)) {
    if (algoSupports(*forced, coll, shape.nranks) && shapeAllows(*forced, shape)) {
      // A forced algorithm still gets the model's settings: a hierarchical all-reduce's chunk, rhd's radix
      // under CONFLUX_RHD_RADIX=auto (none elsewhere).
      CostedAlgo at{*forced, 0};
      if (shape.numNodes > 1) at = bestSettings(*forced, coll, bytes, costShape(shape), cost_);
      std::string chosen;
      if (at.chunkBytes != 0) chosen = "chunk " + chunkText(at.chunkBytes);
      if (at.radix != 0) chosen += (chosen.empty() ? "" : ", ") + std::string("radix ") + std::to_string(at.radix);
      return {*forced, chosen.empty() ? "forced by CONFLUX_ALGO" : "forced by CONFLUX_ALGO, " + chosen + " chosen by the cost model",
              at.chunkBytes, at.radix};
    }
    Selection s = supported(byDefault(coll, bytes, shape), coll, shape);
    s.reason = "CONFLUX_ALGO=" + std::string(algoName(*forced)) + " does not apply to " +
               std::string(collectiveName(coll)) + " here; " + s.reason;
    return s;
  }
  return supported(byDefault(coll, bytes, shape), coll, shape);
}

Selection Selector::supported(Selection s, Collective coll, const CommShape& shape) const {
  if (algoSupports(s.algo, coll, shape.nranks) && shapeAllows(s.algo, shape)) return s;
  for (Algo a : algosFor(coll)) {
    if (algoSupports(a, coll, shape.nranks) && shapeAllows(a, shape)) {
      return {a, s.reason + " (" + std::string(algoName(s.algo)) + " does not apply; using " +
                     std::string(algoName(a)) + ")"};
    }
  }
  return s;
}

std::string Selector::predictedTimes(const PlanParams& p, const CommShape& shape, uint64_t eagerBytes) const {
  std::vector<CostedAlgo> ranked;
  for (Algo a : algosFor(p.coll)) {
    if (!algoSupports(a, p.coll, p.nranks) || !shapeAllows(a, shape)) continue;
    try {
      PlanParams q = p;
      CostedAlgo at{a, 0};
      if (shape.numNodes > 1) at = bestSettings(a, p.coll, bufferBytes(p), costShape(shape), cost_);
      if (at.chunkBytes != 0) q.chunkBytes = at.chunkBytes;
      if (at.radix != 0) q.radix = at.radix;
      const double t = planSeconds(a, q, cost_);
      if (t >= 0) ranked.push_back({a, t, at.chunkBytes, at.radix});
    } catch (const Error&) {  // e.g. staging too small for this count: not a candidate
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const CostedAlgo& x, const CostedAlgo& y) { return x.seconds < y.seconds; });
  std::string s = "predicted (" + cost_.source + "): ";
  if (eagerBytes > 0) {
    s += describeCandidates({{Algo::Eager, eagerSeconds(eagerBytes, p.nranks, cost_)}}) + "; plans: ";
  }
  return s + (ranked.empty() ? "none" : describeCandidates(ranked, 6));
}

Selection Selector::byDefault(Collective coll, uint64_t bytes, const CommShape& shape) const {
  const std::string n = std::to_string(shape.nranks) + " ranks";
  if (shape.nranks == 1) return {Algo::Pairwise, "1 rank: local copy"};
  if (coll == Collective::SendRecv) return {Algo::Pairwise, "point-to-point batch"};
  if (shape.allLocal && shape.peerBuffers) {
    return {Algo::Direct, n + " share memory and reach each other's buffers (mapped, or read with process_vm_readv): direct (no staging copies)"};
  }
  if (shape.allLocal) {
    const std::string shared = n + " share memory";
    switch (coll) {
      case Collective::AllReduce:
        if (bytes <= kOneShotMaxBytes) {
          return {Algo::OneShot, shared + " and " + human(bytes) + " <= " + human(kOneShotMaxBytes) +
                                     ": one-shot (each rank reduces all inputs, one barrier)"};
        }
        return {Algo::TwoShot, shared + " and " + human(bytes) + " > " + human(kOneShotMaxBytes) +
                                   ": two-shot (each rank reduces 1/n, then all copy)"};
      case Collective::AllToAll:
        return {Algo::OneShot, shared + ": direct (each rank reads its block from every peer)"};
      default:
        return {Algo::OneShot, shared + ": direct load/store on peers' staging"};
    }
  }
  // Across nodes: the cost model's cheapest candidate that applies to this shape.
  std::vector<CostedAlgo> ranked = rankAlgorithms(coll, bytes, costShape(shape), cost_);
  ranked.erase(std::remove_if(ranked.begin(), ranked.end(), [&](const CostedAlgo& c) { return !shapeAllows(c.algo, shape); }),
               ranked.end());
  if (ranked.empty()) return {Algo::Ring, n + " across nodes: ring (no costed candidate)"};
  return {ranked.front().algo,
          n + " on " + std::to_string(shape.numNodes) + " nodes, " + human(bytes) + ", cost model (" + cost_.source +
              "): " + describeCandidates(ranked),
          ranked.front().chunkBytes, ranked.front().radix};
}

}  // namespace conflux
