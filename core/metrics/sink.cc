// The sink over prometheus-cpp's data model (MetricFamily) and its TextSerializer, which writes the
// exposition format (escaping, float formatting, histogram _bucket/_sum/_count lines) so that we do not.
// Built without prometheus-cpp, the sink keeps nothing and its text is empty (metrics are then off:
// core/metrics/service.cc says so when asked for them).
#include "core/metrics/sink.h"

#include <limits>
#include <unordered_map>

#if CONFLUX_HAVE_METRICS
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>
#endif

namespace conflux::metrics {

#if CONFLUX_HAVE_METRICS

struct Sink::Impl {
  std::vector<prometheus::MetricFamily> families;
  std::unordered_map<std::string, size_t> index;

  prometheus::ClientMetric& add(const std::string& name, const std::string& help, prometheus::MetricType type,
                                const Labels& common, const Labels& labels) {
    auto [it, fresh] = index.emplace(name, families.size());
    if (fresh) {
      prometheus::MetricFamily f;
      f.name = name;
      f.help = help;
      f.type = type;
      families.push_back(std::move(f));
    }
    prometheus::ClientMetric& m = families[it->second].metric.emplace_back();
    m.label.reserve(common.size() + labels.size());
    for (const auto& [k, v] : common) m.label.push_back({k, v});
    for (const auto& [k, v] : labels) m.label.push_back({k, v});
    return m;
  }
};

Sink::Sink() : impl_(std::make_unique<Impl>()) {}
Sink::~Sink() = default;

void Sink::counter(const std::string& name, const std::string& help, const Labels& labels, double value) {
  impl_->add(name, help, prometheus::MetricType::Counter, common_, labels).counter.value = value;
}

void Sink::gauge(const std::string& name, const std::string& help, const Labels& labels, double value) {
  impl_->add(name, help, prometheus::MetricType::Gauge, common_, labels).gauge.value = value;
}

void Sink::histogram(const std::string& name, const std::string& help, const Labels& labels, const HistogramSample& h) {
  prometheus::ClientMetric& m = impl_->add(name, help, prometheus::MetricType::Histogram, common_, labels);
  m.histogram.sample_count = h.count;
  m.histogram.sample_sum = h.sum;
  m.histogram.bucket.reserve(h.buckets.size() + 1);
  for (const auto& [le, cumulative] : h.buckets) m.histogram.bucket.push_back({cumulative, le});
  m.histogram.bucket.push_back({h.count, std::numeric_limits<double>::infinity()});
}

std::string Sink::text() const { return prometheus::TextSerializer().Serialize(impl_->families); }

size_t Sink::families() const { return impl_->families.size(); }

#else  // built without prometheus-cpp

struct Sink::Impl {};
Sink::Sink() = default;
Sink::~Sink() = default;
void Sink::counter(const std::string&, const std::string&, const Labels&, double) {}
void Sink::gauge(const std::string&, const std::string&, const Labels&, double) {}
void Sink::histogram(const std::string&, const std::string&, const Labels&, const HistogramSample&) {}
std::string Sink::text() const { return {}; }
size_t Sink::families() const { return 0; }

#endif

}  // namespace conflux::metrics
