// What a metrics source writes into when it is scraped: families of samples in Prometheus's data model
// (counters, gauges, histograms with cumulative buckets), merged by name so that many sources (every
// communicator of a process, the NCCL net plugin's transport) share one family per metric. The sink
// knows nothing of where the text goes (core/metrics/service.h serves it over HTTP and into files);
// it is made with prometheus-cpp's data model and text serializer where the build has them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/metrics/families.h"

struct cfx_metrics_sink_v1;

namespace conflux::metrics {

/// Label name and value pairs of one sample (names follow Prometheus's rules: [a-zA-Z_][a-zA-Z0-9_]*).
using Labels = std::vector<std::pair<std::string, std::string>>;

/// One histogram's samples: per finite bucket its upper bound and the number of observations at or
/// below it (cumulative, non-decreasing); count (the +Inf bucket) and sum of all observations.
struct HistogramSample {
  std::vector<std::pair<double, uint64_t>> buckets;
  uint64_t count = 0;
  double sum = 0;
};

class Sink {
 public:
  Sink();
  /// A sink that passes every sample on to another copy's sink (core/metrics/process_hub.h); its own
  /// text stays empty.
  explicit Sink(const cfx_metrics_sink_v1* forward);
  ~Sink();
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  /// Adds a sample of counter `name` (ending in _total), creating the family with `help` the first time.
  void counter(const std::string& name, const std::string& help, const Labels& labels, double value);
  void gauge(const std::string& name, const std::string& help, const Labels& labels, double value);
  void histogram(const std::string& name, const std::string& help, const Labels& labels, const HistogramSample& h);
  /// A sample of a family several sources share (core/metrics/families.h).
  void counter(const Family& f, const Labels& labels, double value) { counter(f.name, f.help, labels, value); }

  /// Labels added to every sample (the process's identity: job, rank, host), first among its labels.
  void setCommonLabels(Labels labels) { common_ = std::move(labels); }
  /// The text exposition format (version 0.0.4) of every family added so far.
  std::string text() const;
  /// Families added so far (for tests).
  size_t families() const;
  /// A C table through which another copy's sources write into this sink (valid while it lives).
  cfx_metrics_sink_v1 table();

 private:
  // The forwarding half of each method: true when the sample went to the other copy.
  bool forwardSample(int kind, const std::string& name, const std::string& help, const Labels& labels, double value);
  bool forwardHistogram(const std::string& name, const std::string& help, const Labels& labels,
                        const HistogramSample& h);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  const cfx_metrics_sink_v1* forward_ = nullptr;
  Labels common_;
};

}  // namespace conflux::metrics
