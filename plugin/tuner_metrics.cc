#include "plugin/tuner_metrics.h"

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>

#include "core/log.h"
#include "core/metrics/service.h"
#include "plugin/nccl_tuner_abi.h"
#include "plugin/tuner_rules.h"

namespace conflux::plugin::tuner {
namespace {

constexpr int kColls = abi::kCollAllReduce + 1;
constexpr int kSizeClasses = 48;  // (2^(c-1), 2^c] bytes, as the communicators' size_class
constexpr int kPerSource = abi::kNumAlgorithms * abi::kNumProtocols;
constexpr int kChoices = 2 * kPerSource + 1;  // rule and model x (algo, proto), then "nccl"

struct Table {
  std::array<std::array<std::array<std::atomic<uint64_t>, kChoices>, kSizeClasses>, kColls> calls{};
  std::atomic<int64_t> contexts{0};
};

Table& table() {
  static auto* t = new Table();  // never freed: a scrape may run at exit
  return *t;
}

int sizeClassOf(size_t bytes) {
  const int c = bytes <= 1 ? 0 : static_cast<int>(std::bit_width(bytes - 1));
  return c < kSizeClasses ? c : kSizeClasses - 1;
}

class TunerSource final : public metrics::Source {
 public:
  void collect(metrics::Sink& sink) const override {
    const Table& t = table();
    sink.gauge("conflux_tuner_communicators", "NCCL communicators the Conflux tuner is tuning", {},
               static_cast<double>(t.contexts.load(std::memory_order_relaxed)));
    for (int coll = 0; coll < kColls; ++coll) {
      for (int size = 0; size < kSizeClasses; ++size) {
        for (int choice = 0; choice < kChoices; ++choice) {
          const uint64_t n = t.calls[coll][size][choice].load(std::memory_order_relaxed);
          if (n == 0) continue;
          const bool nccl = choice == kChoices - 1;
          const int algo = nccl ? -1 : (choice % kPerSource) / abi::kNumProtocols;
          const int proto = nccl ? -1 : choice % abi::kNumProtocols;
          sink.counter("conflux_tuner_decisions_total", "The tuner's getCollInfo calls, by the NCCL algorithm and "
                       "protocol it preferred and what chose them (by: rule, model; nccl: NCCL's own choice was kept)",
                       {{"collective", collName(coll)}, {"size_class", std::to_string(uint64_t{1} << size)},
                        {"by", nccl ? "nccl" : choice < kPerSource ? "rule" : "model"},
                        {"algorithm", nccl ? "nccl" : algoName(algo)}, {"protocol", nccl ? "nccl" : protoName(proto)}},
                       static_cast<double>(n));
        }
      }
    }
  }
};

}  // namespace

void countDecision(int collType, size_t nBytes, DecidedBy by, int algo, int proto) {
  if (collType < 0 || collType >= kColls) return;
  int choice = kChoices - 1;
  if (by != DecidedBy::Nccl) {
    if (algo < 0 || algo >= abi::kNumAlgorithms || proto < 0 || proto >= abi::kNumProtocols) return;
    choice = (by == DecidedBy::Rule ? 0 : kPerSource) + algo * abi::kNumProtocols + proto;
  }
  table().calls[size_t(collType)][size_t(sizeClassOf(nBytes))][size_t(choice)].fetch_add(1, std::memory_order_relaxed);
}

void countContext(int delta) { table().contexts.fetch_add(delta, std::memory_order_relaxed); }

void startTunerMetrics() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      if (!metrics::start(metrics::identityFromLauncher())) return;
      table();
      metrics::addSource(new TunerSource());  // for the life of the process
    } catch (const std::exception& e) {
      CFX_WARN(kInit, "tuner: no metrics: %s", e.what());
    }
  });
}

}  // namespace conflux::plugin::tuner
