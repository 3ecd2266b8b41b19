// Whether a call can run a direct plan over peers' own buffers, agreed by all local ranks.
//
// Protocol, for every call that could run direct (all ranks on one node, not eager, not forced to
// another algorithm; the test depends only on the arguments, so every rank runs it for the same calls):
//   1. each rank writes into its DirectSlot (transport/shm/layout.h) where the buffers the peers would
//      touch live (send, and recv for all-reduce) — a cfxMemAlloc block, or "not mappable" — and stores
//      the slot's seq with release;
//   2. each rank arrives at a barrier. A rank whose own buffers are not mappable knows the answer (no)
//      and goes on without waiting; the others wait for the barrier and read every peer's slot;
//   3. when every rank's buffers are mappable, they map the peers' blocks (cached) and run Algo::Direct;
//      otherwise everyone runs the plan the selector picks for private buffers.
// Every plan that follows has at least one Barrier (the direct plan two, staging plans at least one),
// which a rank reaches only after reading the slots, so a slot is never rewritten (at the next
// eligible call) while a peer may still read it.
#pragma once

#include <cstdint>
#include <vector>

#include "src/executor.h"
#include "core/types.h"
#include "transport/shm/shared_memory.h"
#include "transport/shm/shm_world.h"

namespace conflux {

class DirectCalls {
 public:
  DirectCalls(shm::ShmWorld& world, const ExecEnv& env);

  /// Step 1: publishes this rank's buffers for the next eligible call. Returns whether the buffers
  /// peers would touch are all mappable.
  bool publish(Collective coll, int root, const void* send, uint64_t sendBytes, const void* recv, uint64_t recvBytes);

  /// Step 3 (after the barrier): true when every rank's buffers are mappable; then `buffers` holds each
  /// rank's send and recv as mapped here. Throws Error(SystemError) when a peer's block cannot be mapped.
  bool resolve(Collective coll, int root, ExecBuffers& buffers);

 private:
  static bool needsSend(Collective coll, int rank, int root);
  static bool needsRecv(Collective coll) { return coll == Collective::AllReduce; }

  shm::ShmWorld& world_;
  const ExecEnv& env_;
  shm::PeerMappings mappings_;
  uint64_t seq_ = 0;
  std::vector<const std::byte*> send_;
  std::vector<std::byte*> recv_;
};

}  // namespace conflux
