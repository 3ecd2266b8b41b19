// The dataflow graph of a plan: for each operation, the earlier ones it must wait for.
//
// The executor runs a plan's operations as soon as their inputs are ready instead of round by round
// (src/executor.cc), so that one segment's next step does not wait for every other message of the round.
// It stays equivalent to the round semantics of plan.h because it keeps every order those semantics
// define between operations that touch the same bytes:
//   - program order: a round's communication operations in listed order, then its local operations in
//     listed order, round after round;
//   - an operation waits for each earlier one that touches overlapping bytes of the same buffer when at
//     least one of the two writes (read after write, write after read, write after write);
//   - a Barrier is a fence: it waits for every earlier operation, and every later one waits for it (it
//     orders accesses by other ranks, which no byte range here can see);
//   - messages to one peer, and from one peer, keep their plan order (the executor enforces that per
//     channel; the graph gives each message its predecessor on the channel).
// In place, the caller's send and receive buffers alias: the graph is then built with the send buffer's
// position inside the receive buffer, so that their bytes are compared as one buffer. A peer's send and
// receive buffers (BufRef::peerSend/peerRecv) are compared as two: the plans that name them (direct) touch
// a peer's aliased bytes only within one operation, and cross-rank accesses are ordered by barriers.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "algorithms/plan.h"

namespace conflux {

struct OpGraph {
  /// The operations in program order (indices into Plan::ops): each round's communication first.
  std::vector<uint32_t> order;
  /// By op index: the operations it waits for are deps[depStart[i] .. depStart[i + 1]) (op indices,
  /// each earlier in program order). A Barrier has none here: it waits for every earlier operation.
  std::vector<uint32_t> depStart;
  std::vector<uint32_t> deps;
  /// By op index: the previous message on the same channel (same peer and direction; Send, or Recv and
  /// RecvReduce), kNone for the first one and for operations that are not messages.
  std::vector<uint32_t> channelPrev;
  /// By op index: the round it belongs to.
  std::vector<uint32_t> roundOf;
  /// By round: the program position after its last operation (rounds are contiguous in program order).
  std::vector<uint32_t> roundEnd;
  /// The highest byte the plan touches in this rank's own send and receive buffers (to tell whether a
  /// call's buffers overlap).
  uint64_t sendExtent = 0;
  uint64_t recvExtent = 0;
  /// The send buffer's offset inside the receive buffer the graph was built for; nullopt: apart.
  std::optional<int64_t> sendInRecv;

  static constexpr uint32_t kNone = UINT32_MAX;
};

/// Builds the graph of rank `rank`'s `plan` (references to a peer's buffers that name `rank` are its own).
/// `sendInRecv`: where the rank's send buffer starts inside its receive buffer when they alias (in place;
/// may be negative), nullopt when they are apart.
OpGraph buildOpGraph(const Plan& plan, int rank, std::optional<int64_t> sendInRecv);

/// Where the send buffer lies in the receive buffer for the graph of `g`'s plan, given the call's buffer
/// addresses: nullopt when the bytes the plan touches in the two do not overlap.
std::optional<int64_t> sendInRecvOf(const OpGraph& g, const void* send, const void* recv);

}  // namespace conflux
