// One communicator's metrics: what its calls count (operations, bytes, durations by collective and
// message-size class, the algorithms chosen, errors by kind, the call in flight, the sequence number,
// the last progress) and, at a scrape, the samples core/metrics/service.h serves.
//
// The data path writes, the scrape reads, no lock between them: only the thread running the
// communicator's calls writes the counters (the communicator's call mutex makes it one at a time), so an
// update is a relaxed load and store of a word it alone writes, not a locked read-modify-write; a scrape
// reads each word whole. Errors may also be counted by another thread (an abort) and use fetch_add.
// Histogram cells (one per collective and size class) are made on a class's first call; a scrape sees a
// cell once its pointer is published (release/acquire).
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"
#include "core/metrics/service.h"
#include "core/types.h"
#include "src/traffic_counters.h"
#include "transport/network.h"

namespace conflux {

class FlightRecorder;

/// The duration histogram's finite buckets: upper bounds 1 us x 2^k, k = 0 .. kDurationBuckets-1
/// (1 us to about 67 s), then +Inf.
inline constexpr int kDurationBuckets = 27;
/// Message-size classes: class c holds calls of (2^(c-1), 2^c] bytes (class 0: 1 byte), up to 2^47.
inline constexpr int kSizeClasses = 48;
/// Algorithms counted apart per collective (recorder name indices 0 .. kCountedAlgorithms-2); later
/// ones share the last slot, exported as algorithm "other".
inline constexpr int kCountedAlgorithms = 32;

/// The bytes a call's size is counted as: nccl-tests' "size", the larger of its send and receive
/// buffers (algorithms/plan.h bufferSizes: all-gather's output, reduce-scatter's and all-to-all's input,
/// the buffer otherwise). Inline, on every call: the unit test holds it to bufferSizes.
inline uint64_t callBytes(Collective coll, uint64_t count, size_t eltSize, int nranks) {
  const uint64_t block = count * eltSize;
  switch (coll) {
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
      return block * static_cast<uint64_t>(nranks > 0 ? nranks : 0);
    default:
      return block;
  }
}

/// The size class of `bytes` (see kSizeClasses).
inline int sizeClassOf(uint64_t bytes) {
  const int c = bytes <= 1 ? 0 : static_cast<int>(std::bit_width(bytes - 1));
  return c < kSizeClasses ? c : kSizeClasses - 1;
}

class CommMetrics final : public metrics::Source {
 public:
  struct Setup {
    std::string comm;    ///< the `comm` label: the configured name, else commId
    std::string commId;  ///< the `comm_id` label: the same on every rank, unique per communicator
    int rank = 0, nranks = 1;
    const FlightRecorder* recorder = nullptr;  ///< algorithm names and the /status view (outlives this)
    std::string remoteTransport;  ///< the network's name (transport::Network::name), "" on one node
    const transport::Network* network = nullptr;  ///< its rails' counters (null: none); outlives the source's registration
  };
  explicit CommMetrics(Setup setup);
  ~CommMetrics() override;

  // ---- the call thread only (inline: every call) ----
  /// A call starts: a collective (numbered like the flight recorder's, the same on every rank) or a
  /// point-to-point batch (not numbered: only some ranks make it).
  void began(bool collective) { bump(collective ? calls_.collStarted : calls_.p2pStarted); }
  /// The call ended at `endTicks` after `ticks`; `algorithm` is its recorder name index (0: none). The
  /// fewest words possible: operation and byte totals per collective are sums over its cells, and the
  /// calls in flight are the calls started less those ended, all added up at a scrape.
  void completed(Collective coll, uint64_t bytes, uint64_t ticks, uint32_t algorithm, uint64_t endTicks) {
    const auto c = static_cast<size_t>(coll);
    const int size = sizeClassOf(bytes);
    Cell* cell = cells_[c][size].load(std::memory_order_relaxed);
    if (cell == nullptr) cell = makeCell(c, size);
    add(cell->ticks, ticks);
    add(cell->bytes, bytes);
    bump(cell->buckets[bucketOf(ticks)]);
    if (cell->algorithm.load(std::memory_order_relaxed) != algorithm) cell->algorithm.store(algorithm, std::memory_order_relaxed);
    bump(algorithmOps_[c][algorithm < kCountedAlgorithms ? algorithm : kCountedAlgorithms - 1]);
    calls_.lastEndTicks.store(endTicks, std::memory_order_relaxed);
  }
  /// The call failed with `code` (counted by kind; the call is not in the histogram).
  void failedCall(Code code, uint64_t endTicks) {
    countError(code);
    bump(calls_.failed);
    calls_.lastEndTicks.store(endTicks, std::memory_order_relaxed);
  }

  // ---- any thread ----
  /// Counts an error of kind `code` (failedCall's, or one found outside a call).
  void countError(Code code) { errors_[static_cast<size_t>(code)].fetch_add(1, std::memory_order_relaxed); }
  /// The communicator went out of service with `code` (Ok: healthy).
  void setHealth(Code code) { health_.store(static_cast<int>(code), std::memory_order_relaxed); }

  /// The executor's message counters (ExecEnv::traffic).
  TrafficCounters& traffic() { return traffic_; }

  void collect(metrics::Sink& sink) const override;
  std::string status() const override;

  /// The duration bucket of `ticks` (kDurationBuckets: +Inf): bucket b holds (2^(b-1), 2^b] us, near
  /// enough (whole microseconds, from a 32.32 fixed-point rate: no floating point on the call path).
  int bucketOf(uint64_t ticks) const {
    if (ticks >= hugeTicks_) return kDurationBuckets;  // over an hour: the product would overflow
    const int b = static_cast<int>(std::bit_width((ticks * usPerTickFixed_) >> 32));
    return b < kDurationBuckets ? b : kDurationBuckets;
  }

 private:
  struct Cell {
    std::atomic<uint64_t> ticks{0}, bytes{0};
    std::array<std::atomic<uint64_t>, kDurationBuckets + 1> buckets{};
    std::atomic<uint32_t> algorithm{0};  // the last call's
  };
  static void bump(std::atomic<uint64_t>& a) { a.store(a.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  static void add(std::atomic<uint64_t>& a, uint64_t v) {
    a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
  }
  Cell* makeCell(size_t coll, int sizeClass);
  void collectTraffic(metrics::Sink& sink, double nsPerTick) const;
  void collectRails(metrics::Sink& sink) const;

  Setup setup_;
  // Fixed at construction: bucket bounds never move, and the seconds counters, converted with it, never
  // go down (a rate measured again at each scrape would move with the clock's slew).
  double nsPerTick_ = 0;
  uint64_t usPerTickFixed_ = 0;  // microseconds per tick, times 2^32
  uint64_t hugeTicks_ = 0;       // 2^32 us (71 minutes) in ticks: below it, ticks * usPerTickFixed_ < 2^64
  // One line of the words every call writes; collStarted is also the sequence number.
  struct alignas(64) Calls {
    std::atomic<uint64_t> collStarted{0}, p2pStarted{0}, failed{0}, lastEndTicks{0};
  } calls_;
  std::array<std::array<std::atomic<uint64_t>, kCountedAlgorithms>, kNumCollectives> algorithmOps_{};
  std::array<std::array<std::atomic<Cell*>, kSizeClasses>, kNumCollectives> cells_{};
  std::array<std::atomic<uint64_t>, 16> errors_{};  // by Code
  std::atomic<int> health_{0};
  TrafficCounters traffic_;
};

}  // namespace conflux
