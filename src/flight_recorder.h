// The flight recorder: every communicator keeps a ring of its last CONFLUX_TRACE_ENTRIES calls (what was
// called, with which algorithm, its state, when, and for a call that waits, the round and the peer it
// waits for), and writes it as JSON to CONFLUX_TRACE_DIR when the communicator fails (a timeout, an
// error, an abort), when it is destroyed in error, and on SIGUSR1 where CONFLUX_TRACE_SIGNAL is on.
// `conflux-trace DIR` reads the dumps of all ranks and says where they diverged (docs/observability.md
// has the schema, "conflux.trace" version 1).
//
// No lock on the data path: only the thread running the communicator's calls writes entries (the
// communicator's call mutex makes it one at a time); readers (a dump from another thread, the signal
// dumper) copy an entry under its version counter, a seqlock, and retry when a write overlapped. Every
// field is a relaxed atomic, so a torn read is detected, never undefined. A call costs two counter reads
// (core/ticks.h) and a dozen plain stores into one 64-byte entry.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/types.h"

namespace conflux {

/// Where a call is. The values are the schema's "state" strings, in order.
enum class TraceState : uint8_t { Queued = 0, Started = 1, Completed = 2, Failed = 3 };
const char* traceStateName(TraceState s);

/// One call as the recorder saw it (a consistent copy of a ring entry).
struct TraceRecord {
  uint64_t seq = 0;  ///< n-th collective call of the communicator (1-based), or n-th point-to-point batch
  bool p2p = false;  ///< a point-to-point batch (seq counts this rank's batches only)
  Collective coll = Collective::AllReduce;
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  TraceState state = TraceState::Queued;
  int32_t root = 0;
  uint64_t count = 0;   ///< elements (a point-to-point batch: its operations)
  uint64_t bytes = 0;   ///< count x the datatype's size (a point-to-point batch: the bytes it sends)
  uint32_t algorithm = 0;  ///< FlightRecorder::algorithmName index (0: not chosen yet)
  uint64_t queuedTicks = 0, startTicks = 0, endTicks = 0;
  int32_t waitRound = -1;  ///< 0-based round the call last blocked in, -1 when it never blocked
  int32_t waitPeer = -1;   ///< the global rank it was waiting for then, -1 when unknown
};

/// Who this communicator is, for the dump's header.
struct TraceIdentity {
  std::string commId;  ///< the same on every rank of the communicator (a hash of its unique id)
  std::string name;    ///< configured name, "" when none
  int rank = 0, nranks = 1, localRank = 0, localSize = 1, node = 0, nodes = 1;
  std::string host;
};

class FlightRecorder;

namespace trace_detail {

/// One ring entry, one cache line. Only the call thread writes; the version is odd while it rewrites
/// the entry for a new call (begin), and counts the rewrites: entry k of the recorder lives in slot
/// k % capacity with version 2 (k / capacity + 1), so a reader knows which call a slot holds. Later
/// changes of one field (algorithm, wait, end) are single atomic stores that a reader sees whole or not
/// at all; the state goes last, with release, after the end time.
struct alignas(64) Slot {
  std::atomic<uint32_t> version{0};
  std::atomic<uint32_t> algorithm{0};
  std::atomic<uint64_t> seq{0};
  // coll | dtype << 8 | op << 16 | state << 24 | p2p << 30 | root << 32 (a point-to-point batch: its
  // number of operations instead of the root)
  std::atomic<uint64_t> kind{0};
  std::atomic<uint64_t> count{0};  // a point-to-point batch: the bytes it sends
  std::atomic<uint64_t> queued{0}, start{0}, end{0};
  std::atomic<uint64_t> wait{~uint64_t{0}};  // round (low 32 bits) | peer << 32; all ones: never waited
};
static_assert(sizeof(Slot) == 64, "a ring entry is one cache line");

constexpr uint64_t kStateShift = 24;
constexpr uint64_t kStateMask = uint64_t{0x3f} << kStateShift;
constexpr uint64_t kP2pBit = uint64_t{1} << 30;

inline uint64_t packKind(Collective coll, DataType dtype, RedOp op, TraceState state, bool p2p, int root) {
  return static_cast<uint64_t>(coll) | static_cast<uint64_t>(static_cast<uint8_t>(dtype)) << 8 |
         static_cast<uint64_t>(static_cast<uint8_t>(op)) << 16 | static_cast<uint64_t>(state) << kStateShift |
         (p2p ? kP2pBit : 0) | static_cast<uint64_t>(static_cast<uint32_t>(root)) << 32;
}

}  // namespace trace_detail

/// The entry of the call in progress, as the executor sees it: it notes where it blocks (slow path only).
class TraceCursor {
 public:
  TraceCursor() = default;
  /// A call is being recorded (false when the ring is empty).
  bool active() const { return slot_ != nullptr; }
  /// The call blocked in `round` waiting for global rank `peer` (-1: unknown). Cheap; called before a
  /// rank sleeps, never on the fast path.
  void noteWait(int round, int peer) const {
    if (slot_ == nullptr) return;
    const uint64_t w = static_cast<uint32_t>(round) | static_cast<uint64_t>(static_cast<uint32_t>(peer)) << 32;
    slot_->wait.store(w, std::memory_order_relaxed);
  }

 private:
  friend class FlightRecorder;
  trace_detail::Slot* slot_ = nullptr;
};

class FlightRecorder {
 public:
  /// A ring of `entries` calls (0: keeps nothing and dumps nothing). Registers with the process's list of
  /// recorders (for SIGUSR1); `dir` is where dumps go ("" : none).
  FlightRecorder(TraceIdentity id, size_t entries, std::string dir);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  /// Interns an algorithm name (off the data path: when a plan is made); returns its index (>= 1).
  uint32_t internAlgorithm(const std::string& name);

  // ---- the call thread only (inline: they run on every call) ----
  /// A new call enters the ring: made at queuedTicks, run from startTicks (ticksNow() readings); returns
  /// its cursor (inactive when the ring is empty).
  TraceCursor begin(Collective coll, DataType dtype, RedOp op, int root, uint64_t count, uint64_t queuedTicks,
                    uint64_t startTicks) {
    if (capacity_ == 0) return {};
    return start(++collSeq_, trace_detail::packKind(coll, dtype, op, TraceState::Started, false, root), count,
                 queuedTicks, startTicks);
  }
  /// A new point-to-point batch of `ops` operations that sends `bytes`.
  TraceCursor beginP2p(uint32_t ops, uint64_t bytes, uint64_t queuedTicks, uint64_t startTicks) {
    if (capacity_ == 0) return {};
    return start(++p2pSeq_,
                 trace_detail::packKind(Collective::SendRecv, DataType::Uint8, RedOp::Sum, TraceState::Started, true,
                                        static_cast<int>(ops)),
                 bytes, queuedTicks, startTicks);
  }
  static void setAlgorithm(const TraceCursor& c, uint32_t algorithm) {
    if (c.slot_ != nullptr) c.slot_->algorithm.store(algorithm, std::memory_order_relaxed);
  }
  /// The call ended now (`endTicks`), completed or failed.
  static void end(const TraceCursor& c, bool ok, uint64_t endTicks) {
    trace_detail::Slot* s = c.slot_;
    if (s == nullptr) return;
    s->end.store(endTicks, std::memory_order_relaxed);
    const uint64_t k = s->kind.load(std::memory_order_relaxed);
    const TraceState state = ok ? TraceState::Completed : TraceState::Failed;
    s->kind.store((k & ~trace_detail::kStateMask) | static_cast<uint64_t>(state) << trace_detail::kStateShift,
                  std::memory_order_release);
  }

  /// Records the communicator's first error (its code, message and the rank it names, -1 if none).
  void noteError(const Status& s, int failedRank);

  // ---- any thread ----
  /// The last `max` entries, oldest first (consistent copies).
  std::vector<TraceRecord> snapshot(size_t max = SIZE_MAX) const;
  /// The dump as JSON text ("conflux.trace" v1), `reason` being timeout, error, abort, signal, destroy
  /// or status (a live view: GET /status), with the last `maxEntries` entries.
  std::string toJson(const std::string& reason, size_t maxEntries = SIZE_MAX) const;
  /// Writes the dump to `dir/<commId>.rank<R>.json` (temporary file, then rename); false when there is
  /// no directory or writing failed (logged). Serialised against other dumps of this recorder.
  bool dump(const std::string& reason) const;
  const TraceIdentity& identity() const { return id_; }
  /// The name of algorithm index `index` (internAlgorithm), "" for 0 or an unknown index.
  std::string algorithmName(uint32_t index) const;
  bool enabled() const { return capacity_ > 0; }

  /// Every live recorder dumps (reason "signal"): what the SIGUSR1 thread runs.
  static void dumpAll(const std::string& reason);
  /// Installs the SIGUSR1 handler and its dumping thread once per process (CONFLUX_TRACE_SIGNAL).
  static void installSignalDump();

 private:
  friend class TraceCursor;
  trace_detail::Slot* slotAt(uint64_t index) const { return &slots_[index % capacity_]; }
  TraceCursor start(uint64_t seq, uint64_t packedKind, uint64_t count, uint64_t queuedTicks, uint64_t startTicks);

  TraceIdentity id_;
  std::string dir_;
  size_t capacity_ = 0;
  std::unique_ptr<trace_detail::Slot[]> slots_;
  std::atomic<uint64_t> written_{0};  // entries begun so far (the next one's index)
  uint64_t collSeq_ = 0, p2pSeq_ = 0;  // call thread only

  mutable std::mutex namesMutex_;
  std::vector<std::string> names_;  // index - 1

  mutable std::mutex errorMutex_;
  Status error_;
  int failedRank_ = -1;
  int64_t errorWallNs_ = 0;
  mutable std::mutex dumpMutex_;
};

}  // namespace conflux
