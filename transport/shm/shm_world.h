// Shared-memory transport among the ranks of one node.
//
// Each local rank creates one segment in CONFLUX_SHM_DIR (/dev/shm), named from the job secret, holding:
//   - a control block: doorbell (futex word), pid, barrier counter, a shared error slot, call descriptors;
//   - one incoming byte-stream channel per local peer (ring buffer, CONFLUX_SHM_CHANNEL_BYTES);
//   - a peer-visible staging area (2 x CONFLUX_SHM_STAGING_BYTES, pre-faulted) for direct algorithms.
// Every rank maps every peer's segment; once all have mapped (a bootstrap barrier) each unlinks its own,
// so nothing is left in /dev/shm even if a process is killed later.
//
// Waiting: a rank that cannot progress spins briefly, then sleeps on its own doorbell (a futex in its
// segment). Anyone who makes progress that another rank may wait for (writes into its channel, frees
// space in a channel it sends on, arrives at a barrier, posts an error) rings that rank's doorbell.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace conflux::shm {

struct EagerSlot;   // layout.h
struct DirectSlot;  // layout.h

/// What ShmWorld needs from the bootstrap: an all-gather and a barrier among the local ranks only.
struct LocalExchange {
  /// out = concatenation of every local rank's `mine` (all equal size), in local-rank order.
  std::function<std::vector<uint8_t>(const std::vector<uint8_t>& mine)> allGather;
  std::function<void()> barrier;
};

struct ShmConfig {
  std::string dir = "/dev/shm";
  std::string jobTag;               ///< Hex tag derived from the job secret (not the secret itself).
  int localRank = 0;
  int localSize = 1;
  std::vector<int> globalRanks;     ///< Global rank of each local rank (for messages).
  size_t channelBytes = 1 << 20;    ///< Per ordered pair; rounded up to a multiple of 4096.
  size_t stagingBytes = 8 << 20;    ///< Usable staging per epoch; the segment holds two (double buffer).
};

/// Sender side of the byte-stream channel from this rank to one local peer.
class SendChannel {
 public:
  virtual ~SendChannel() = default;
  /// Copies up to `bytes` from src into the channel without blocking; returns how many were accepted
  /// (0 when full). Rings the receiver when it wrote anything.
  virtual size_t write(const void* src, size_t bytes) = 0;
  /// Produces the bytes in place instead of copying them: like write(), but each contiguous piece of the
  /// ring is filled by transform(dst, src + offset, n, ctx), and only a multiple of `granule` bytes (an
  /// element size, at most 8) is accepted. Used to scale a rank's input as it enters the channel.
  using Transform = void (*)(void* dst, const void* src, size_t bytes, const void* ctx);
  virtual size_t writeTransformed(const void* src, size_t bytes, size_t granule, Transform transform,
                                  const void* ctx) = 0;
  /// Bytes that write() could accept right now.
  virtual size_t writable() const = 0;
};

/// Receiver side of the byte-stream channel from one local peer to this rank.
class RecvChannel {
 public:
  virtual ~RecvChannel() = default;
  /// Contiguous readable bytes (up to maxBytes) at the head of the stream; empty when none. The data stays
  /// valid until consume().
  virtual std::span<const std::byte> readable(size_t maxBytes) = 0;
  /// Releases the first n readable bytes; rings the sender.
  virtual void consume(size_t n) = 0;
};

/// Error posted by any local rank, seen by all (first poster wins).
struct SharedError {
  int code = 0;          ///< conflux::Code value.
  int failedRank = -1;   ///< Global rank at fault (dead/stuck), or -1.
  int reporterRank = -1; ///< Global rank that posted it.
  std::string message;   ///< Truncated to fit the slot (<= 200 chars).
};

/// Per-call descriptor published for cross-rank argument checks.
struct CallDescriptor {
  uint64_t seq = 0;      ///< 1-based call number on this communicator.
  uint32_t coll = 0;
  uint32_t dtype = 0;
  uint32_t op = 0;
  int32_t root = 0;
  uint64_t count = 0;
};

/// Threading: each channel direction has one user thread at a time (SPSC); barrier*() and publishCall()
/// belong to the thread that drives collectives; doorbell(), sleep(), wakeSelf(), postError(), error(),
/// peerCall() and deadPeers() may be called from any thread.
class ShmWorld {
 public:
  /// Creates this rank's segment, exchanges names/pids via `ex`, maps all peers, unlinks its own
  /// segment after a barrier, opens pidfds for liveness. Throws Error on failure (nothing left behind).
  static std::unique_ptr<ShmWorld> create(const ShmConfig& cfg, const LocalExchange& ex);
  virtual ~ShmWorld() = default;

  virtual int localRank() const = 0;
  virtual int localSize() const = 0;

  virtual SendChannel& sendTo(int localPeer) = 0;
  virtual RecvChannel& recvFrom(int localPeer) = 0;

  /// Base of local rank `localPeer`'s staging for `epoch` (epoch & 1 picks one of the two halves).
  virtual std::byte* staging(int localPeer, uint64_t epoch) = 0;
  virtual size_t stagingBytes() const = 0;

  // --- Barrier among all local ranks: arrive, then poll barrierReached until true. ---
  /// Increments this rank's arrival counter; the rank that completes the generation rings every peer
  /// (waiters sleeping on their doorbell wake once per barrier). Returns the generation to wait for.
  virtual uint64_t barrierArrive() = 0;
  /// True when every local rank has arrived at `generation`.
  virtual bool barrierReached(uint64_t generation) const = 0;
  /// Local rank of the first rank that has not yet arrived at `generation`, or -1 (for error messages).
  virtual int barrierLaggard(uint64_t generation) const = 0;
  /// True when local rank `localPeer` has arrived at `generation`.
  virtual bool barrierReachedBy(int localPeer, uint64_t generation) const = 0;

  // --- Waiting. ---
  /// Current value of this rank's doorbell; read it BEFORE re-checking conditions, then sleep with it.
  virtual uint32_t doorbell() const = 0;
  /// Sleeps until the doorbell differs from `seen` or `timeoutMs` passes (spurious wakeups allowed).
  /// timeoutMs == 0 returns at once; timeoutMs < 0 waits without limit (avoid: every wait needs a deadline).
  /// Pattern: `seen = doorbell(); if (!condition()) sleep(seen, ms);` (see transport/shm/doorbell.h).
  virtual void sleep(uint32_t seen, int timeoutMs) = 0;
  /// Rings this rank's own doorbell (used by abort from another thread).
  virtual void wakeSelf() = 0;
  /// Rings local rank `localPeer`'s doorbell (may be self). Call it after publishing something the peer
  /// may wait for outside the channels and the barrier, e.g. a flag in staging stored with release.
  virtual void wakePeer(int localPeer) = 0;

  // --- Failure handling. ---
  /// Every local rank whose process has exited (a peer that finished its work and exited is not an error
  /// unless someone still waits for it: callers filter by who they wait for).
  virtual std::vector<int> deadPeers() = 0;
  /// Posts an error to every local rank's slot (first one wins per slot) and rings them all.
  virtual void postError(const SharedError& err) = 0;
  /// The error in this rank's slot, if any.
  virtual std::optional<SharedError> error() const = 0;

  // --- Eager slots (small collectives; src/eager.cc has the protocol). ---
  /// Local rank `localRank`'s eager slot for `parity` (0 or 1); own slot included.
  virtual EagerSlot& eagerSlot(int localRank, int parity) = 0;
  /// After storing an eager slot's flag: a seq_cst fence, then rings each peer that may sleep in
  /// sleepUnless() (doorbell.h, ring-if-sleeping).
  virtual void wakeSleepingPeers() = 0;
  /// Sleeps on this rank's doorbell until rung or timeoutMs, unless `ready()` holds after announcing it.
  virtual void sleepUnless(const std::function<bool()>& ready, int timeoutMs) = 0;

  // --- Direct algorithms over peers' own buffers. ---
  /// Local rank `localRank`'s buffer descriptor slot (own included).
  virtual DirectSlot& directSlot(int localRank) = 0;
  /// Process id of local rank `localRank` as this process sees it; 0 when it is in another pid namespace.
  virtual int pidOf(int localRank) const = 0;

  // --- Cross-rank argument checks. ---
  virtual void publishCall(const CallDescriptor& d) = 0;
  /// Local peer's descriptor for call `seq`, if the peer has published it and not yet overwritten it.
  virtual std::optional<CallDescriptor> peerCall(int localPeer, uint64_t seq) const = 0;
};

}  // namespace conflux::shm
