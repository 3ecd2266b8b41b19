// How the tuner decides, per getCollInfo call:
//
// 1. Rules (CONFLUX_TUNER_CONFIG), in file order: the first rule whose collective and byte range match
//    and whose entry [algo][proto] is available in this call's table wins: that entry becomes 0.0 and,
//    when the rule names one, *nChannels its channel count. A matching rule whose entry is unavailable
//    (negative, or outside numAlgo x numProto) is passed over.
// 2. The cost model. NCCL's TREE and RING are the two NCCL algorithms with a counterpart among Conflux's
//    families: TREE ~ {tree, dbtree, hier_dbtree} (latency grows with log n), RING ~ {ring, hier} (a
//    ring over the ranks or between nodes; latency grows with n, full bandwidth). The model predicts the
//    best member of each family for (collective, nBytes, nRanks, nNodes); the faster family's NCCL
//    algorithm is chosen. Where a family has no formula for the collective (all-gather and
//    reduce-scatter have no tree in Conflux, nor in NCCL) or the communicator has one rank, the model
//    has no opinion and the table stays as NCCL computed it.
//    The protocol follows the regime of the predicted time t against the same algorithm's latency
//    t0 (its time for 0 bytes): latency-bound (t < 2 t0, the bytes cost less than the steps) prefers LL,
//    then LL128, then SIMPLE; bandwidth-bound prefers SIMPLE, then LL128. The first available of these
//    entries becomes 0.0; if none is, nothing changes.
// Everything else (other entries, nChannels, the v5 constants) is left as NCCL computed it.
#include "plugin/tuner_impl.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "algorithms/cost_model.h"
#include "core/config.h"
#include "plugin/tuner_metrics.h"
#include "plugin/tuner_rules.h"

namespace conflux::plugin::tuner {
namespace {

/// The model's verdict for one (collective, size): an NCCL algorithm (-1: no opinion) and the regime.
struct ModelChoice {
  int algo = -1;
  bool latencyBound = false;
  double treeSeconds = -1;
  double ringSeconds = -1;
};

struct Context {
  abi::Logger logger = nullptr;
  CostShape shape;
  CostParams params;
  std::vector<Rule> rules;

  std::mutex mu;  // guards the two caches below (NCCL may call from several threads)
  std::unordered_map<uint64_t, ModelChoice> choices;  // key: nBytes << 3 | collType
  std::set<std::tuple<int, int, int, int>> logged;    // (rule line or 0, coll, algo, proto) logged at INFO

  void log(int level, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    if (logger == nullptr) return;
    char buf[512];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, args);
    va_end(args);
    logger(level, abi::kLogSubsysInit, "conflux-tuner", 0, "%s", buf);
  }
};

/// Conflux's collective for an NCCL collType (the five the tuner is asked about).
bool toCollective(int collType, Collective& c) {
  switch (collType) {
    case abi::kCollBroadcast: c = Collective::Broadcast; return true;
    case abi::kCollReduce: c = Collective::Reduce; return true;
    case abi::kCollAllGather: c = Collective::AllGather; return true;
    case abi::kCollReduceScatter: c = Collective::ReduceScatter; return true;
    case abi::kCollAllReduce: c = Collective::AllReduce; return true;
    default: return false;
  }
}

/// The fastest member of a family: its time (-1 when none has a formula) and which.
CostedAlgo bestOf(std::initializer_list<Algo> family, Collective c, uint64_t bytes, const Context& ctx) {
  CostedAlgo best{Algo::Ring, -1};
  for (Algo a : family) {
    const double t = predictSeconds(a, c, bytes, ctx.shape, ctx.params);
    if (t >= 0 && (best.seconds < 0 || t < best.seconds)) best = {a, t};
  }
  return best;
}

ModelChoice decide(int collType, size_t nBytes, const Context& ctx) {
  ModelChoice out;
  Collective c{};
  if (!toCollective(collType, c) || ctx.shape.nranks < 2) return out;
  const CostedAlgo tree = bestOf({Algo::BinomialTree, Algo::DoubleBinaryTree, Algo::HierarchicalDbtree}, c, nBytes, ctx);
  const CostedAlgo ring = bestOf({Algo::Ring, Algo::Hierarchical}, c, nBytes, ctx);
  out.treeSeconds = tree.seconds;
  out.ringSeconds = ring.seconds;
  if (tree.seconds < 0 || ring.seconds < 0) return out;
  const CostedAlgo& win = tree.seconds < ring.seconds ? tree : ring;
  out.algo = &win == &tree ? abi::kAlgoTree : abi::kAlgoRing;
  const double latency = predictSeconds(win.algo, c, 0, ctx.shape, ctx.params);
  out.latencyBound = win.seconds < 2 * latency;
  return out;
}

/// The table NCCL passes: a contiguous float[numAlgo][numProto] (7 x 3: float (*)[3]) cast to float**.
/// Indexed by row and column over the flat array, never through the float** itself; only the known
/// algorithms and protocols inside numAlgo x numProto are reachable.
class CostTable {
 public:
  CostTable(float** table, int numAlgo, int numProto)
      : base_(reinterpret_cast<float*>(table)), numAlgo_(numAlgo), numProto_(numProto) {}
  /// The entry, or NULL when it is outside the table or unavailable (negative).
  float* available(int algo, int proto) const {
    if (base_ == nullptr || algo < 0 || proto < 0 || algo >= numAlgo_ || proto >= numProto_) return nullptr;
    if (algo >= abi::kNumAlgorithms || proto >= abi::kNumProtocols) return nullptr;
    float* e = base_ + size_t(algo) * size_t(numProto_) + size_t(proto);
    return *e >= 0.0f ? e : nullptr;
  }

 private:
  float* base_;
  int numAlgo_;
  int numProto_;
};

std::string bytesText(size_t n) {
  char buf[32];
  if (n >= (size_t{1} << 30) && n % (size_t{1} << 30) == 0) std::snprintf(buf, sizeof buf, "%zu GiB", n >> 30);
  else if (n >= (size_t{1} << 20) && n % (size_t{1} << 20) == 0) std::snprintf(buf, sizeof buf, "%zu MiB", n >> 20);
  else if (n >= 1024 && n % 1024 == 0) std::snprintf(buf, sizeof buf, "%zu KiB", n >> 10);
  else std::snprintf(buf, sizeof buf, "%zu B", n);
  return buf;
}

/// Applies the first matching rule with an available entry; true when one was applied.
bool applyRules(Context& ctx, int collType, size_t nBytes, const CostTable& table, int* nChannels) {
  for (const Rule& r : ctx.rules) {
    if ((r.coll >= 0 && r.coll != collType) || nBytes < r.minBytes || nBytes > r.maxBytes) continue;
    float* entry = table.available(r.algo, r.proto);
    if (entry == nullptr) continue;
    *entry = 0.0f;
    if (r.nChannels > 0 && nChannels != nullptr) *nChannels = r.nChannels;
    countDecision(collType, nBytes, DecidedBy::Rule, r.algo, r.proto);
    std::lock_guard<std::mutex> lock(ctx.mu);
    if (ctx.logged.insert({r.line, collType, r.algo, r.proto}).second) {
      ctx.log(abi::kLogInfo, "Conflux tuner: %s %s: %s/%s%s by rule at line %d", collName(collType),
              bytesText(nBytes).c_str(), algoName(r.algo), protoName(r.proto),
              r.nChannels > 0 ? (", " + std::to_string(r.nChannels) + " channels").c_str() : "", r.line);
    }
    return true;
  }
  return false;
}

/// Applies the model's choice; false when it had none or none of its entries is available.
bool applyModel(Context& ctx, int collType, size_t nBytes, const CostTable& table) {
  ModelChoice choice;
  {
    std::lock_guard<std::mutex> lock(ctx.mu);
    const bool cacheable = nBytes < (size_t{1} << 60);
    const uint64_t key = (uint64_t(nBytes) << 3) | uint64_t(collType);
    auto it = cacheable ? ctx.choices.find(key) : ctx.choices.end();
    if (it != ctx.choices.end()) {
      choice = it->second;
    } else {
      choice = decide(collType, nBytes, ctx);
      if (ctx.choices.size() >= 4096) ctx.choices.clear();  // bounded: sizes are usually few
      if (cacheable) ctx.choices.emplace(key, choice);
      ctx.log(abi::kLogTrace, "Conflux tuner: %s %s on %d ranks / %d nodes: model tree %.1f us, ring %.1f us",
              collName(collType), bytesText(nBytes).c_str(), ctx.shape.nranks, ctx.shape.nodes,
              choice.treeSeconds * 1e6, choice.ringSeconds * 1e6);
    }
  }
  if (choice.algo < 0) return false;
  static constexpr int kLatencyOrder[] = {abi::kProtoLL, abi::kProtoLL128, abi::kProtoSimple};
  static constexpr int kBandwidthOrder[] = {abi::kProtoSimple, abi::kProtoLL128};
  const int* order = choice.latencyBound ? kLatencyOrder : kBandwidthOrder;
  const int count = choice.latencyBound ? 3 : 2;
  for (int i = 0; i < count; ++i) {
    float* entry = table.available(choice.algo, order[i]);
    if (entry == nullptr) continue;
    *entry = 0.0f;
    countDecision(collType, nBytes, DecidedBy::Model, choice.algo, order[i]);
    std::lock_guard<std::mutex> lock(ctx.mu);
    if (ctx.logged.insert({0, collType, choice.algo, order[i]}).second) {
      ctx.log(abi::kLogInfo, "Conflux tuner: %s from %s: %s/%s (model: tree family %.1f us, ring family %.1f us, %s)",
              collName(collType), bytesText(nBytes).c_str(), algoName(choice.algo), protoName(order[i]),
              choice.treeSeconds * 1e6, choice.ringSeconds * 1e6,
              choice.latencyBound ? "latency-bound" : "bandwidth-bound");
    }
    return true;
  }
  return false;
}

/// Runs `body`, converting every exception to a result code and a warning naming the call.
template <class F>
abi::Result guard(abi::Logger logger, const char* call, F&& body) {
  try {
    body();
    return abi::kSuccess;
  } catch (const std::bad_alloc&) {
    if (logger != nullptr) logger(abi::kLogWarn, abi::kLogSubsysInit, "conflux-tuner", 0, "Conflux tuner: %s: out of memory", call);
    return abi::kSystemError;
  } catch (const std::exception& e) {
    if (logger != nullptr) logger(abi::kLogWarn, abi::kLogSubsysInit, "conflux-tuner", 0, "Conflux tuner: %s: %s", call, e.what());
    return abi::kInternalError;
  } catch (...) {
    return abi::kInternalError;
  }
}

}  // namespace

abi::Result init(size_t nRanks, size_t nNodes, abi::Logger logger, void** ctx) {
  if (ctx == nullptr) return abi::kInvalidArgument;
  return guard(logger, "init", [&] {
    auto c = std::make_unique<Context>();
    c->logger = logger;
    // The shape: ranks per node is nRanks / nNodes when that divides evenly; otherwise the largest
    // node is assumed to hold ceil(nRanks / nNodes) ranks and the layout is not uniform (the
    // hierarchical formulas then do not apply).
    const size_t nodes = nNodes == 0 ? 1 : std::min(nNodes, nRanks == 0 ? size_t{1} : nRanks);
    c->shape.nranks = int(std::max<size_t>(1, nRanks));
    c->shape.nodes = int(nodes);
    c->shape.uniform = c->shape.nranks % c->shape.nodes == 0;
    c->shape.ranksPerNode = (c->shape.nranks + c->shape.nodes - 1) / c->shape.nodes;

    if (const std::string file = config::getString(config::Var::COST_FILE); !file.empty()) {
      try {
        loadCostFile(file, c->params);
      } catch (const std::exception& e) {
        c->params = CostParams{};
        c->log(abi::kLogWarn, "Conflux tuner: %s; using the cost model's defaults", e.what());
      }
    }
    if (const std::string file = config::getString(config::Var::TUNER_CONFIG); !file.empty()) {
      Context* raw = c.get();
      c->rules = loadRules(file, [raw](const std::string& why) { raw->log(abi::kLogWarn, "Conflux tuner: %s", why.c_str()); });
    }
    c->log(abi::kLogInfo, "Conflux tuner: %d ranks on %d nodes, cost parameters from %s, %zu rules", c->shape.nranks,
           c->shape.nodes, c->params.source.c_str(), c->rules.size());
    *ctx = c.release();
    countContext(+1);
    startTunerMetrics();
  });
}

abi::Result getCollInfo(void* ctx, int collType, size_t nBytes, int /*numPipeOps*/, float** collCostTable, int numAlgo,
                        int numProto, int /*regBuff*/, int* nChannels) {
  if (ctx == nullptr) return abi::kInvalidArgument;
  Context& c = *static_cast<Context*>(ctx);
  return guard(c.logger, "getCollInfo", [&] {
    const CostTable table(collCostTable, numAlgo, numProto);
    if (applyRules(c, collType, nBytes, table, nChannels)) return;
    if (!applyModel(c, collType, nBytes, table)) countDecision(collType, nBytes, DecidedBy::Nccl, -1, -1);
  });
}

abi::Result finalize(void* ctx) {
  if (ctx != nullptr) countContext(-1);
  delete static_cast<Context*>(ctx);
  return abi::kSuccess;
}

}  // namespace conflux::plugin::tuner
