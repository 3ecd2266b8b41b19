// A communicator's samples at a scrape (the families are listed in docs/observability.md).
#include "src/comm_metrics.h"

#include <algorithm>

#include "core/ticks.h"
#include "src/flight_recorder.h"

namespace conflux {
namespace {

// The error kinds every communicator exports, zero or not, so that rate() sees each from the start.
constexpr Code kErrorKinds[] = {Code::Timeout,        Code::RemoteError,  Code::Aborted,
                                Code::SystemError,    Code::InvalidUsage, Code::InvalidArgument,
                                Code::InternalError,  Code::CudaError};

// The /status view carries the last calls of the ring only: enough to see where each rank is.
constexpr size_t kStatusEntries = 16;

}  // namespace

CommMetrics::CommMetrics(Setup setup) : setup_(std::move(setup)) {
  nsPerTick_ = processTickScale().settledNsPerTick();
  usPerTickFixed_ = std::max<uint64_t>(1, static_cast<uint64_t>(nsPerTick_ / 1e3 * 4294967296.0));
  hugeTicks_ = UINT64_MAX / usPerTickFixed_;
}

CommMetrics::~CommMetrics() {
  for (auto& row : cells_) {
    for (auto& cell : row) delete cell.load(std::memory_order_acquire);
  }
}

CommMetrics::Cell* CommMetrics::makeCell(size_t coll, int sizeClass) {
  auto* cell = new Cell();
  cells_[coll][sizeClass].store(cell, std::memory_order_release);  // a scrape reads it from here on
  return cell;
}

void CommMetrics::collect(metrics::Sink& sink) const {
  const std::string& comm = setup_.comm;
  const std::string& id = setup_.commId;
  const double nsPerTick = nsPerTick_;
  sink.gauge("conflux_communicator_ranks", "Ranks of the communicator", {{"comm", comm}, {"comm_id", id}}, setup_.nranks);
  sink.gauge("conflux_communicator_rank", "This process's rank in the communicator", {{"comm", comm}, {"comm_id", id}}, setup_.rank);
  sink.gauge("conflux_communicator_healthy", "1 while the communicator is in service, 0 once an error or an abort "
             "put it out of service", {{"comm", comm}, {"comm_id", id}}, health_.load(std::memory_order_relaxed) == 0 ? 1 : 0);
  // Completions first, then starts: a call that ends in between counts as still in flight, never as
  // fewer than none.
  std::array<uint64_t, kNumCollectives> ops{}, bytes{};
  uint64_t ended = calls_.failed.load(std::memory_order_relaxed);
  for (int c = 0; c < kNumCollectives; ++c) {
    for (int s = 0; s < kSizeClasses; ++s) {
      const Cell* cell = cells_[c][s].load(std::memory_order_acquire);
      if (cell == nullptr) continue;
      for (const auto& b : cell->buckets) ops[c] += b.load(std::memory_order_relaxed);
      bytes[c] += cell->bytes.load(std::memory_order_relaxed);
    }
    ended += ops[c];
  }
  const uint64_t seq = calls_.collStarted.load(std::memory_order_relaxed);
  const uint64_t started = seq + calls_.p2pStarted.load(std::memory_order_relaxed);
  sink.gauge("conflux_collective_sequence", "Number of the last collective call started (the same call has the "
             "same number on every rank: max - min over a communicator's ranks is the desync)", {{"comm", comm}, {"comm_id", id}},
             static_cast<double>(seq));
  sink.gauge("conflux_collective_in_flight", "Calls started and not yet ended (collectives and point-to-point "
             "batches)", {{"comm", comm}, {"comm_id", id}}, static_cast<double>(started >= ended ? started - ended : 0));
  const uint64_t last = calls_.lastEndTicks.load(std::memory_order_relaxed);
  sink.gauge("conflux_collective_last_progress_timestamp_seconds", "Unix time the last call ended (0: none yet)",
             {{"comm", comm}, {"comm_id", id}}, last == 0 ? 0.0 : static_cast<double>(processTickScale().wallNs(last, processTickScale().nsPerTick())) / 1e9);
  for (Code code : kErrorKinds) {
    sink.counter("conflux_collective_errors_total", "Calls that failed, by kind (timeout, remote_error, aborted, ...)",
                 {{"comm", comm}, {"comm_id", id}, {"kind", codeLabel(code)}},
                 static_cast<double>(errors_[static_cast<size_t>(code)].load(std::memory_order_relaxed)));
  }
  collectTraffic(sink, nsPerTick);
  collectRails(sink);
  for (int c = 0; c < kNumCollectives; ++c) {
    const std::string coll(collectiveName(static_cast<Collective>(c)));
    const metrics::Labels labels = {{"comm", comm}, {"comm_id", id}, {"collective", coll}};
    sink.counter("conflux_collective_operations_total", "Calls that completed", labels,
                 static_cast<double>(ops[c]));
    sink.counter("conflux_collective_bytes_total", "Bytes of the calls that completed (nccl-tests' size: the larger "
                 "of the send and receive buffers)", labels, static_cast<double>(bytes[c]));
    for (int a = 0; a < kCountedAlgorithms; ++a) {
      const uint64_t n = algorithmOps_[c][a].load(std::memory_order_relaxed);
      if (n == 0) continue;
      std::string name = a == kCountedAlgorithms - 1 ? "other"
                         : setup_.recorder != nullptr ? setup_.recorder->algorithmName(static_cast<uint32_t>(a))
                                                      : "";
      sink.counter("conflux_collective_algorithm_operations_total", "Calls that completed, by the algorithm that ran "
                   "them (eager, p2p, device or a plan's name)",
                   {{"comm", comm}, {"comm_id", id}, {"collective", coll}, {"algorithm", name.empty() ? "unknown" : name}},
                   static_cast<double>(n));
    }
    for (int s = 0; s < kSizeClasses; ++s) {
      const Cell* cell = cells_[c][s].load(std::memory_order_acquire);
      if (cell == nullptr) continue;
      metrics::HistogramSample h;
      uint64_t cumulative = 0;
      double le = 1e-6;
      for (int b = 0; b < kDurationBuckets; ++b, le *= 2) {
        cumulative += cell->buckets[b].load(std::memory_order_relaxed);
        h.buckets.emplace_back(le, cumulative);
      }
      h.count = cumulative + cell->buckets[kDurationBuckets].load(std::memory_order_relaxed);
      h.sum = static_cast<double>(cell->ticks.load(std::memory_order_relaxed)) * nsPerTick / 1e9;
      const std::string size = std::to_string(uint64_t{1} << s);
      sink.histogram("conflux_collective_duration_seconds", "Time from a call's start to its end, by message-size "
                     "class (size_class: the power of two at or above the call's bytes)",
                     {{"comm", comm}, {"comm_id", id}, {"collective", coll}, {"size_class", size}}, h);
      std::string name =
          setup_.recorder != nullptr ? setup_.recorder->algorithmName(cell->algorithm.load(std::memory_order_relaxed)) : "";
      sink.gauge("conflux_collective_algorithm_info", "The algorithm of the last call of the collective and size "
                 "class (always 1)", {{"comm", comm}, {"comm_id", id}, {"collective", coll}, {"size_class", size},
                 {"algorithm", name.empty() ? "unknown" : name}}, 1);
    }
  }
}

void CommMetrics::collectTraffic(metrics::Sink& sink, double nsPerTick) const {
  const TrafficCounters& t = traffic_;
  for (int c : {TrafficCounters::kLocal, TrafficCounters::kRemote}) {
    if (c == TrafficCounters::kRemote && setup_.remoteTransport.empty()) continue;  // one node: no network
    const metrics::Labels labels = {{"comm", setup_.comm}, {"comm_id", setup_.commId},
                                    {"transport", c == TrafficCounters::kLocal ? "shm" : setup_.remoteTransport},
                                    {"peer", c == TrafficCounters::kLocal ? "local" : "remote"}};
    const auto v = [](const std::atomic<uint64_t>& a) { return static_cast<double>(a.load(std::memory_order_relaxed)); };
    sink.counter(metrics::kTransportSentBytes, labels, v(t.sentBytes[c]));
    sink.counter(metrics::kTransportSentMessages, labels, v(t.sentMessages[c]));
    sink.counter(metrics::kTransportReceivedBytes, labels, v(t.receivedBytes[c]));
    sink.counter(metrics::kTransportReceivedMessages, labels, v(t.receivedMessages[c]));
    sink.counter("conflux_transport_wait_seconds_total", "Time calls spent blocked waiting on peers of the class "
                 "(after spinning)", labels, v(t.waitTicks[c]) * nsPerTick / 1e9);
  }
}

void CommMetrics::collectRails(metrics::Sink& sink) const {
  if (setup_.network == nullptr) return;
  const std::vector<transport::RailTraffic> rails = setup_.network->railTraffic();
  if (rails.empty()) return;
  uint64_t retries = 0;
  for (const transport::RailTraffic& r : rails) {
    const metrics::Labels labels = {{"comm", setup_.comm}, {"comm_id", setup_.commId}, {"rail", std::to_string(r.rail)},
                                    {"nic", r.nic}};
    sink.counter(metrics::kNicSentBytes, labels, static_cast<double>(r.sentBytes));
    sink.counter(metrics::kNicReceivedBytes, labels, static_cast<double>(r.receivedBytes));
    retries += r.retries;
  }
  sink.counter(metrics::kTransportRetries, {{"comm", setup_.comm}, {"comm_id", setup_.commId}, {"transport", setup_.remoteTransport},
               {"peer", "remote"}},
               static_cast<double>(retries));
}

std::string CommMetrics::status() const {
  return setup_.recorder != nullptr ? setup_.recorder->toJson("status", kStatusEntries) : std::string();
}

}  // namespace conflux
