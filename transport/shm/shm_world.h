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

#include "transport/local_group.h"
#include "transport/shm/core_distance.h"

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
  bool crossMemory = true;          ///< Probe single-copy reads between the ranks (cross_memory.h).
};

// The stream, error and call-descriptor types are the local-group interface's (transport/local_group.h).
using transport::CallDescriptor;
using transport::RecvChannel;
using transport::SendChannel;
using transport::SharedError;

/// The shared-memory local group: every member maps every other's segment. Beyond the LocalGroup
/// interface (threading as there) it gives the eager and direct strategies their slots, the members'
/// process ids, and doorbell rings outside the streams.
class ShmWorld : public transport::LocalGroup {
 public:
  /// Creates this rank's segment, exchanges names/pids via `ex`, maps all peers, unlinks its own
  /// segment after a barrier, opens pidfds for liveness. Throws Error on failure (nothing left behind).
  static std::unique_ptr<ShmWorld> create(const ShmConfig& cfg, const LocalExchange& ex);

  /// Rings local rank `localPeer`'s doorbell (may be self). Call it after publishing something the peer
  /// may wait for outside the channels and the barrier, e.g. a flag in staging stored with release.
  virtual void wakePeer(int localPeer) = 0;

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
  /// True when every local rank found at start-up that it can read every other's memory with
  /// process_vm_readv (ShmConfig::crossMemory, cross_memory.h); the same answer on every rank.
  virtual bool crossMemory() const = 0;
  /// This rank's handoff samples and verdict so far (noteBarrierSeen, coresFarApart).
  virtual const CoreDistance& coreDistance() const = 0;
};

}  // namespace conflux::shm
