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
// (core/ticks.h) and a dozen plain stores.
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
  uint64_t bytes = 0;   ///< bytes this rank sends (the API's send buffer size)
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

/// The entry of the call in progress, as the executor sees it: it notes where it blocks (slow path only).
class TraceCursor {
 public:
  TraceCursor() = default;
  /// The call blocked in `round` waiting for global rank `peer` (-1: unknown). Cheap; called before a
  /// rank sleeps, never on the fast path.
  void noteWait(int round, int peer) const;

 private:
  friend class FlightRecorder;
  struct Slot;
  Slot* slot_ = nullptr;
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

  // ---- the call thread only ----
  /// A new call enters the ring: made at queuedTicks, run from startTicks (ticksNow() readings); returns
  /// its cursor (inactive when the ring is empty).
  TraceCursor begin(Collective coll, DataType dtype, RedOp op, int root, uint64_t count, uint64_t bytes,
                    uint64_t queuedTicks, uint64_t startTicks);
  /// A new point-to-point batch of `ops` operations.
  TraceCursor beginP2p(uint64_t ops, uint64_t bytes, uint64_t queuedTicks, uint64_t startTicks);
  void setAlgorithm(const TraceCursor& c, uint32_t algorithm);
  void end(const TraceCursor& c, bool ok);

  /// Records the communicator's first error (its code, message and the rank it names, -1 if none).
  void noteError(const Status& s, int failedRank);

  // ---- any thread ----
  /// The last `max` entries, oldest first (consistent copies).
  std::vector<TraceRecord> snapshot(size_t max = SIZE_MAX) const;
  /// The dump as JSON text ("conflux.trace" v1), `reason` being timeout, error, abort, signal or destroy.
  std::string toJson(const std::string& reason) const;
  /// Writes the dump to `dir/<commId>.rank<R>.json` (temporary file, then rename); false when there is
  /// no directory or writing failed (logged). Serialised against other dumps of this recorder.
  bool dump(const std::string& reason) const;
  const TraceIdentity& identity() const { return id_; }
  bool enabled() const { return capacity_ > 0; }

  /// Every live recorder dumps (reason "signal"): what the SIGUSR1 thread runs.
  static void dumpAll(const std::string& reason);
  /// Installs the SIGUSR1 handler and its dumping thread once per process (CONFLUX_TRACE_SIGNAL).
  static void installSignalDump();

 private:
  friend class TraceCursor;
  TraceCursor::Slot* slotAt(uint64_t index) const;
  TraceCursor start(uint64_t seq, uint64_t packedKind, uint64_t count, uint64_t bytes, uint64_t queuedTicks,
                    uint64_t startTicks);
  std::string algorithmName(uint32_t index) const;

  TraceIdentity id_;
  std::string dir_;
  size_t capacity_ = 0;
  std::unique_ptr<TraceCursor::Slot[]> slots_;
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
