// Whether a call can run a direct plan over peers' own buffers, agreed by all local ranks.
//
// Protocol, for every call that could run direct (all ranks on one node, not eager, not forced to
// another algorithm; the test depends only on the arguments, so every rank runs it for the same calls):
//   1. each rank writes into its DirectSlot (transport/shm/layout.h) where the buffers the peers would
//      touch live (send, and recv for all-reduce) — a cfxMemAlloc block, or "not mappable" — its send
//      buffer's address, and whether it offers single-copy reads of its private buffers for this call
//      (below); then it stores the slot's seq with release;
//   2. each rank arrives at a barrier. A rank whose own buffers are not mappable and which offers no
//      single-copy reads knows the answer (staged) and goes on without waiting; the others wait for
//      the barrier and read every peer's slot;
//   3. when every rank's buffers are mappable, they map the peers' blocks (cached) and run Algo::Direct
//      (Mode::Mapped). Otherwise, when every rank offered single-copy reads, they run Algo::Direct too,
//      reading each private send buffer with process_vm_readv (Mode::SingleCopy,
//      transport/shm/cross_memory.h) and the mappable ones mapped; otherwise everyone runs the plan the
//      selector picks for private buffers (Mode::Staged).
// A rank offers single-copy reads when the world found at start-up that every local rank can read every
// other's memory (ShmWorld::crossMemory), the collective only copies from peers' send buffers
// (all-gather, broadcast, all-to-all: the kernel copies, nothing is reduced from a peer's memory) and
// each piece read from a peer has at least CONFLUX_SHM_CMA_MIN_BYTES. With CONFLUX_SHM_CMA=auto it also
// needs what measured faster (offersSingleCopy): all-gather or all-to-all, two ranks, and buffers likely
// in cache (RecentBuffers): pieces of kLargePieceBytes and more when warm, smaller ones only when hot
// (touched within a quarter of the rank's cache share). Warmth matters: the kernel copies page by page,
// about 11 GB/s from cache but 4-5 GB/s from memory here, where staging's two copies run cold at
// 6-7 GB/s, and small pieces gain least. Since the decision is read from the slots, ranks whose settings
// differ still agree.
// Every plan that follows has at least one Barrier (the direct plan two, staging plans at least one),
// which a rank reaches only after reading the slots, so a slot is never rewritten (at the next
// eligible call) while a peer may still read it; the direct plan's last Barrier keeps every send buffer
// unchanged until every peer has read it.
#pragma once

#include <cstdint>
#include <vector>

#include "src/executor.h"
#include "core/types.h"
#include "transport/shm/shared_memory.h"
#include "transport/shm/shm_world.h"

namespace conflux {

/// When private send buffers are read with single copies (process_vm_readv) instead of being staged.
struct SingleCopyPolicy {
  enum class Use { Off, WhenWarm, Always } use = Use::Off;  ///< CONFLUX_SHM_CMA and the start-up probe.
  uint64_t minBytes = 0;  ///< Bytes read from one peer, at least (CONFLUX_SHM_CMA_MIN_BYTES).

  /// The policy CONFLUX_SHM_CMA and CONFLUX_SHM_CMA_MIN_BYTES ask for, given whether the world's probe
  /// found single-copy reads possible. Throws Error(InvalidArgument) naming a malformed variable.
  static SingleCopyPolicy fromConfig(bool possible);
  /// Whether CONFLUX_SHM_CMA lets the shared-memory world probe at all (throws as fromConfig).
  static bool wanted();
};

class DirectCalls {
 public:
  /// CONFLUX_SHM_CMA=auto reads pieces this large from warm buffers; smaller ones only from hot buffers.
  static constexpr uint64_t kLargePieceBytes = uint64_t{512} << 10;
  /// Hot: the reuse distance fits this share of RecentBuffers' budget (1 / kHotShare).
  static constexpr uint64_t kHotShare = 4;

  enum class Mode { Staged, Mapped, SingleCopy };

  /// What a call needs to publish: its collective and buffers.
  struct Call {
    Collective coll = Collective::AllReduce;
    int root = 0;
    const void* send = nullptr;
    uint64_t sendBytes = 0;
    const void* recv = nullptr;
    uint64_t recvBytes = 0;
    uint64_t pieceBytes = 0;  ///< Read from each peer by a copying collective (a block, or the vector).
    bool warm = false;        ///< This rank's buffers are likely in cache (RecentBuffers::warm).
    bool hot = false;         ///< ... and were touched within a quarter of the cache share (kHotShare).
  };

  DirectCalls(shm::ShmWorld& world, const ExecEnv& env, const SingleCopyPolicy& singleCopy);

  /// Step 1: publishes this rank's buffers for the next eligible call. Returns whether this rank must
  /// wait for the barrier and resolve(): its buffers are mappable, or it offers single-copy reads.
  bool publish(const Call& c);

  /// Step 3 (after the barrier): Mapped when every rank's buffers are mappable, else SingleCopy when
  /// every rank offered single-copy reads, else Staged. For Mapped and SingleCopy `buffers` holds each
  /// rank's send (and recv) as mapped here, or as an address in its process (ExecBuffers::peerProcess).
  /// Throws Error(SystemError) when a peer's block cannot be mapped.
  Mode resolve(Collective coll, int root, ExecBuffers& buffers);

 private:
  static bool needsSend(Collective coll, int rank, int root);
  static bool needsRecv(Collective coll) { return coll == Collective::AllReduce; }
  bool offersSingleCopy(const Call& c) const;

  shm::ShmWorld& world_;
  const ExecEnv& env_;
  const SingleCopyPolicy singleCopy_;
  shm::PeerMappings mappings_;
  uint64_t seq_ = 0;
  std::vector<const std::byte*> send_;
  std::vector<std::byte*> recv_;
  std::vector<int> process_;
};

}  // namespace conflux
