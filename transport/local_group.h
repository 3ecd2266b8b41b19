// conflux::transport: what the executor needs from the ranks of its own node.
//
// Where transport.h carries whole messages to ranks on other nodes, a LocalGroup joins the ranks of one
// node: a byte stream to and from each member (so that a receiver reduces a message while its sender is
// still writing it), a barrier, a staging area per member that the others can read and write, a doorbell
// to sleep on, an error slot every member sees, the members' liveness, and the call descriptors the
// members compare to catch mismatched arguments. The executor (src/executor.h) drives the group through
// this interface alone. The library's one implementation is shared memory (transport/shm/shm_world.h,
// which adds what the eager and direct strategies need: slots in mapped memory and the members'
// process ids); tests drive the executor over an in-process fake that delays, stalls and kills members
// (tests/unit/fake_local_group.h).
//
// Threading: each stream direction has one user thread at a time (single producer, single consumer);
// barrier*() and publishCall() belong to the thread that drives collectives; doorbell(), sleep(),
// wakeSelf(), postError(), error(), peerCall(), deadPeers() and stoppedPeers() may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace conflux::transport {

/// Sender side of the byte stream from this member to one other.
class SendChannel {
 public:
  virtual ~SendChannel() = default;
  /// Copies up to `bytes` from src into the stream without blocking; returns how many were accepted
  /// (0 when full). Rings the receiver when it wrote anything.
  virtual size_t write(const void* src, size_t bytes) = 0;
  /// Produces the bytes in place instead of copying them: like write(), but each contiguous piece of the
  /// stream's buffer is filled by transform(dst, src + offset, n, ctx), and only a multiple of `granule`
  /// bytes (an element size, at most 8) is accepted. Used to scale a rank's input as it enters the stream.
  using Transform = void (*)(void* dst, const void* src, size_t bytes, const void* ctx);
  virtual size_t writeTransformed(const void* src, size_t bytes, size_t granule, Transform transform,
                                  const void* ctx) = 0;
  /// Bytes that write() could accept right now.
  virtual size_t writable() const = 0;
};

/// Receiver side of the byte stream from one other member to this one.
class RecvChannel {
 public:
  virtual ~RecvChannel() = default;
  /// Contiguous readable bytes (up to maxBytes) at the head of the stream; empty when none. The data stays
  /// valid until consume().
  virtual std::span<const std::byte> readable(size_t maxBytes) = 0;
  /// Releases the first n readable bytes; rings the sender.
  virtual void consume(size_t n) = 0;
};

/// Error posted by any member, seen by all (first poster wins).
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

class LocalGroup {
 public:
  virtual ~LocalGroup() = default;

  virtual int localRank() const = 0;
  virtual int localSize() const = 0;

  virtual SendChannel& sendTo(int localPeer) = 0;
  virtual RecvChannel& recvFrom(int localPeer) = 0;

  /// Base of member `localPeer`'s staging for `epoch` (epoch & 1 picks one of two halves), as mapped here.
  virtual std::byte* staging(int localPeer, uint64_t epoch) = 0;
  virtual size_t stagingBytes() const = 0;

  // --- Barrier among all members: arrive, then poll barrierReached until true. ---
  /// Counts this member's arrival; the one that completes the generation rings the others. Returns the
  /// generation to wait for.
  virtual uint64_t barrierArrive() = 0;
  /// True when every member has arrived at `generation`.
  virtual bool barrierReached(uint64_t generation) const = 0;
  /// The first member that has not yet arrived at `generation`, or -1 (for error messages).
  virtual int barrierLaggard(uint64_t generation) const = 0;
  /// True when member `localPeer` has arrived at `generation`.
  virtual bool barrierReachedBy(int localPeer, uint64_t generation) const = 0;
  /// Called once per barrier at which this member polled barrierReached in vain at least once, when it
  /// has seen `generation` complete: lets the group time the last arrival's handoff to this member
  /// (shm/core_distance.h). Default: nothing.
  virtual void noteBarrierSeen(uint64_t generation) { (void)generation; }
  /// Whether the members' cores are far apart now, as those handoffs show (shm/core_distance.h); a
  /// member decides alone, from its own waits. Default: never.
  virtual bool coresFarApart() const { return false; }

  // --- Waiting. ---
  /// Current value of this member's doorbell; read it BEFORE re-checking conditions, then sleep with it.
  virtual uint32_t doorbell() const = 0;
  /// Sleeps until the doorbell differs from `seen` or `timeoutMs` passes (spurious wakeups allowed).
  /// timeoutMs == 0 returns at once; timeoutMs < 0 waits without limit (avoid: every wait needs a deadline).
  /// Pattern: `seen = doorbell(); if (!condition()) sleep(seen, ms);`.
  virtual void sleep(uint32_t seen, int timeoutMs) = 0;
  /// Rings this member's own doorbell (used by abort from another thread).
  virtual void wakeSelf() = 0;

  // --- Failure handling. ---
  /// Every member whose process has exited (a member that finished its work and exited is not an error
  /// unless someone still waits for it: callers filter by who they wait for).
  virtual std::vector<int> deadPeers() = 0;
  /// Every member whose process is stopped (SIGSTOP, a debugger), where that can be seen: who to blame
  /// for a timeout when ranks wait on each other in a chain. Default: none seen.
  virtual std::vector<int> stoppedPeers() { return {}; }
  /// Posts an error to every member's slot (first one wins per slot) and rings them all.
  virtual void postError(const SharedError& err) = 0;
  /// The error in this member's slot, if any.
  virtual std::optional<SharedError> error() const = 0;

  // --- Progress along chains of waits. ---
  /// This member's latest progress (a steady-clock time in ns) in collective call `call`: its own, or one
  /// it took over from a member it waits for. Members waiting for this one in the same call count a later
  /// time as progress of their own, so that a chain of ranks behind one whose message crosses a slow link
  /// does not time out while bytes move. Within a call the published time only grows. `hops`: the
  /// progress notices from other nodes the time came through (MessageTransport::tellProgress); passing
  /// through this group adds none, its members sharing one clock.
  virtual void publishProgress(int64_t steadyNs, uint64_t call, uint32_t hops) = 0;
  /// A member's published progress: a steady-clock time in ns (0: none) and its hop count.
  struct PeerProgress {
    int64_t ns = 0;
    uint32_t hops = 0;
  };
  /// The latest progress member `localPeer` published in collective call `call`; none when its latest is
  /// from another call (progress elsewhere says nothing of this call).
  virtual PeerProgress peerProgress(int localPeer, uint64_t call) const = 0;
  /// This member completed collective call `seq` (the communicator's call number; only grows).
  virtual void publishCompleted(uint64_t seq) = 0;
  /// The last collective call member `localPeer` completed (0: none). A member that exited before
  /// completing the call others are in died in it, whether or not they wait for it now.
  virtual uint64_t peerCompleted(int localPeer) const = 0;

  // --- Cross-rank argument checks. ---
  virtual void publishCall(const CallDescriptor& d) = 0;
  /// Member's descriptor for call `seq`, if it has published it and not yet overwritten it.
  virtual std::optional<CallDescriptor> peerCall(int localPeer, uint64_t seq) const = 0;
};

}  // namespace conflux::transport
