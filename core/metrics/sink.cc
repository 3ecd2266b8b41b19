// The sink over prometheus-cpp's data model (MetricFamily) and its TextSerializer, which writes the
// exposition format (escaping, float formatting, histogram _bucket/_sum/_count lines) so that we do not.
// Built without prometheus-cpp, the sink keeps nothing and its text is empty (metrics are then off:
// core/metrics/service.cc says so when asked for them).
#include "core/metrics/sink.h"

#include <limits>
#include <unordered_map>

#include "core/metrics/process_hub.h"

#if CONFLUX_HAVE_METRICS
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>
#endif

namespace conflux::metrics {
namespace {

// Labels as the C tables carry them: name, value, name, value, ...
std::vector<const char*> flatten(const Labels& labels) {
  std::vector<const char*> out;
  out.reserve(labels.size() * 2);
  for (const auto& [k, v] : labels) {
    out.push_back(k.c_str());
    out.push_back(v.c_str());
  }
  return out;
}

Labels unflatten(const char* const* labels, size_t n) {
  Labels out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.emplace_back(labels[2 * i], labels[2 * i + 1]);
  return out;
}

// The other copy calls these with C frames above: nothing may unwind out of them.
void sampleInto(void* ctx, int kind, const char* name, const char* help, const char* const* labels, size_t n,
                double value) noexcept {
  try {
    auto* sink = static_cast<Sink*>(ctx);
    if (kind == 0) sink->counter(name, help, unflatten(labels, n), value);
    else sink->gauge(name, help, unflatten(labels, n), value);
  } catch (...) {
    // Out of memory while scraping: the sample is left out.
  }
}

void histogramInto(void* ctx, const char* name, const char* help, const char* const* labels, size_t n,
                   const double* bounds, const uint64_t* cumulative, size_t buckets, uint64_t count, double sum) noexcept {
  try {
    HistogramSample h;
    h.buckets.reserve(buckets);
    for (size_t i = 0; i < buckets; ++i) h.buckets.emplace_back(bounds[i], cumulative[i]);
    h.count = count;
    h.sum = sum;
    static_cast<Sink*>(ctx)->histogram(name, help, unflatten(labels, n), h);
  } catch (...) {
  }
}

}  // namespace

// A sink table shorter than version 1's (not from a Conflux copy) is not used: the samples are dropped.
Sink::Sink(const cfx_metrics_sink_v1* forward)
    : forward_(forward != nullptr && forward->size >= hub::kSinkV1Bytes ? forward : nullptr) {}

cfx_metrics_sink_v1 Sink::table() { return {sizeof(cfx_metrics_sink_v1), this, &sampleInto, &histogramInto}; }

bool Sink::forwardSample(int kind, const std::string& name, const std::string& help, const Labels& labels,
                         double value) {
  if (forward_ == nullptr) return false;
  const std::vector<const char*> flat = flatten(labels);
  forward_->sample(forward_->ctx, kind, name.c_str(), help.c_str(), flat.data(), labels.size(), value);
  return true;
}

bool Sink::forwardHistogram(const std::string& name, const std::string& help, const Labels& labels,
                            const HistogramSample& h) {
  if (forward_ == nullptr) return false;
  const std::vector<const char*> flat = flatten(labels);
  std::vector<double> bounds;
  std::vector<uint64_t> cumulative;
  for (const auto& [le, c] : h.buckets) {
    bounds.push_back(le);
    cumulative.push_back(c);
  }
  forward_->histogram(forward_->ctx, name.c_str(), help.c_str(), flat.data(), labels.size(), bounds.data(),
                      cumulative.data(), bounds.size(), h.count, h.sum);
  return true;
}

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
  if (forwardSample(0, name, help, labels, value)) return;
  impl_->add(name, help, prometheus::MetricType::Counter, common_, labels).counter.value = value;
}

void Sink::gauge(const std::string& name, const std::string& help, const Labels& labels, double value) {
  if (forwardSample(1, name, help, labels, value)) return;
  impl_->add(name, help, prometheus::MetricType::Gauge, common_, labels).gauge.value = value;
}

void Sink::histogram(const std::string& name, const std::string& help, const Labels& labels, const HistogramSample& h) {
  if (forwardHistogram(name, help, labels, h)) return;
  prometheus::ClientMetric& m = impl_->add(name, help, prometheus::MetricType::Histogram, common_, labels);
  m.histogram.sample_count = h.count;
  m.histogram.sample_sum = h.sum;
  m.histogram.bucket.reserve(h.buckets.size() + 1);
  for (const auto& [le, cumulative] : h.buckets) m.histogram.bucket.push_back({cumulative, le});
  m.histogram.bucket.push_back({h.count, std::numeric_limits<double>::infinity()});
}

std::string Sink::text() const {
  return impl_ == nullptr ? std::string() : prometheus::TextSerializer().Serialize(impl_->families);
}

size_t Sink::families() const { return impl_ == nullptr ? 0 : impl_->families.size(); }

#else  // built without prometheus-cpp

struct Sink::Impl {};
Sink::Sink() = default;
Sink::~Sink() = default;
void Sink::counter(const std::string& name, const std::string& help, const Labels& labels, double value) {
  forwardSample(0, name, help, labels, value);
}
void Sink::gauge(const std::string& name, const std::string& help, const Labels& labels, double value) {
  forwardSample(1, name, help, labels, value);
}
void Sink::histogram(const std::string& name, const std::string& help, const Labels& labels, const HistogramSample& h) {
  forwardHistogram(name, help, labels, h);
}
std::string Sink::text() const { return {}; }
size_t Sink::families() const { return 0; }

#endif

}  // namespace conflux::metrics
