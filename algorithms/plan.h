// Plans: an algorithm's schedule for one rank, as data.
//
// An algorithm turns (collective, count, element size, root, communicator shape) into a Plan per rank:
// an ordered list of rounds, each a small set of operations. The executor (executor.h) runs plans over
// transports and CPU kernels; the simulator (simulator.h) runs the plans of 1..N virtual ranks in one
// process to prove them correct; later the selector costs them.
//
// Round semantics (the simulator implements exactly this; the executor runs each operation as soon as
// every order below between operations that touch the same bytes allows, algorithms/op_graph.h):
//   1. The communication operations of a round (Send, Recv, RecvReduce, Barrier) are posted together and
//      progress concurrently; the round's communication is done when all of them completed. A Barrier is
//      the only communication operation of its round (the executor runs it as a fence: it starts once
//      every earlier operation completed).
//   2. Then the local operations of the round (Copy, Reduce, Finalize, ReduceSpread) run, in the order
//      listed.
//   3. Operations of one round must not conflict: no two may touch overlapping bytes of the same buffer
//      when at least one of them writes (the dst of a RecvReduce, Reduce or ReduceSpread, and a
//      ReduceSpread's extra destinations, may equal one of its own sources exactly). One exception: a
//      local operation may read exactly the bytes a Recv of its round received (by rule 2 the Recv has
//      completed; a larger radix's halving reduces what it received from several peers that way).
//   4. Messages between a pair of ranks match in FIFO order per direction; sizes must agree. The
//      simulator assumes no buffering (a Send completes only once the matching Recv is posted), so a
//      plan it accepts cannot deadlock on finite channel buffers.
//   5. Staging buffers are the only memory other ranks may read (they live in shared memory). A rank may
//      read a peer's staging bytes only after a Barrier that follows the peer's write, and may overwrite
//      its staging bytes only after a Barrier that follows every peer's read of them. Staging is used only
//      by plans whose ranks all share a node.
//      Across calls the executor alternates between two whole staging areas: a call whose plan has
//      stagingBytes > 0 uses area (epoch & 1), where epoch counts the earlier staging-using calls of the
//      communicator. That is why every staging plan contains at least one Barrier: it keeps a rank from
//      rewriting an area (two staging calls later) while a peer may still be reading it.
//
//   6. A peer's Send and Recv buffers (BufRef::peerSend/peerRecv) can be named only by plans of
//      algorithms whose ranks all have peer-mappable buffers (algoUsesPeerBuffers). Such a plan starts
//      with a Barrier (every rank has entered the call: inputs are ready, outputs may be written) and
//      ends with one (nobody returns, and so reuses its buffers, while a peer still touches them); in
//      between, two ranks must not touch the same bytes of a buffer in one barrier epoch when one of
//      them writes.
//
// Buffers are symbolic: Send and Recv are the caller's buffers (in place, they alias as the collective
// defines, and a plan must be correct either way; the executor skips a Copy whose source and destination
// are the same address), Scratch is private to the rank, Staging(rank q) is q's peer-visible staging.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/types.h"

namespace conflux {

enum class BufKind : uint8_t { Send, Recv, Scratch, Staging };

/// A byte offset into one of a rank's buffers (or, for Staging, into rank `rank`'s staging).
struct BufRef {
  BufKind kind = BufKind::Send;
  int32_t rank = -1;    ///< Owner (global rank) of Staging, or of a peer's Send/Recv; -1 means this rank.
  uint64_t offset = 0;  ///< In bytes.

  static BufRef send(uint64_t off) { return {BufKind::Send, -1, off}; }
  static BufRef recv(uint64_t off) { return {BufKind::Recv, -1, off}; }
  static BufRef scratch(uint64_t off) { return {BufKind::Scratch, -1, off}; }
  static BufRef staging(int owner, uint64_t off) { return {BufKind::Staging, owner, off}; }
  static BufRef peerSend(int owner, uint64_t off) { return {BufKind::Send, owner, off}; }
  static BufRef peerRecv(int owner, uint64_t off) { return {BufKind::Recv, owner, off}; }
};

enum class OpKind : uint8_t {
  Send,        ///< Stream `bytes` from src(0) to `peer`.
  Recv,        ///< Receive `bytes` from `peer` into dst.
  RecvReduce,  ///< Receive `bytes` from `peer`; dst = op(src(0), incoming). dst may equal src(0).
  Barrier,     ///< Every rank of the communicator reaches this point (orders staging accesses).
  Copy,        ///< dst = src(0), `bytes` bytes.
  Reduce,      ///< dst = op(src(0), ..., src(nsrc-1)) elementwise; dst may equal one source exactly.
  Finalize,    ///< dst = dst / nranks elementwise when the op is avg; nothing otherwise.
  /// t = op(src(0), ..., src(nsrc-1)), divided by nranks when the op is avg; dst and each of the
  /// `nextra` extra destinations (Plan::extraDst) = t. One pass over the sources for all destinations
  /// (the executor streams them when dst is a receive buffer and the call is out of place and large or
  /// cold; otherwise it reduces into dst and copies from there). Each destination may equal
  /// a source exactly (in place); destinations must not overlap one another.
  ReduceSpread,
};

/// "send", "recv", "scratch", "staging".
std::string_view bufKindName(BufKind k);
/// "Send", "Recv", "RecvReduce", "Barrier", "Copy", "Reduce", "Finalize", "ReduceSpread".
std::string_view opKindName(OpKind k);

constexpr bool isCommOp(OpKind k) {
  return k == OpKind::Send || k == OpKind::Recv || k == OpKind::RecvReduce || k == OpKind::Barrier;
}

struct Op {
  OpKind kind = OpKind::Copy;
  int32_t peer = -1;       ///< Global rank for Send/Recv/RecvReduce.
  uint32_t firstSrc = 0;   ///< Index of the first source in Plan::sources.
  uint32_t nsrc = 0;       ///< Number of sources.
  BufRef dst;
  uint64_t bytes = 0;      ///< Bytes moved or produced (a multiple of the element size).
  uint32_t nextra = 0;     ///< ReduceSpread: destinations besides dst, in Plan::sources after the sources.
};

/// A contiguous range of Plan::ops.
struct Round {
  uint32_t firstOp = 0;
  uint32_t numOps = 0;
};

/// Which ranks share a node, for the hierarchical algorithms: nodes[k] holds node k's global ranks,
/// ascending, and nodes are ordered by their lowest rank. A rank's local index is its position there.
struct NodeLayout {
  std::vector<std::vector<int>> nodes;

  /// Every node has the same number of ranks (and there is at least one).
  bool uniform() const;
  /// Builds the layout from each rank's node key (a node number, or a host identity), in rank order.
  static NodeLayout fromNodeOf(const std::vector<int>& nodeOfRank);
  static NodeLayout fromNodeOf(const std::vector<std::string>& hostOfRank);
};

/// The pipelining chunk of the message-passing plans: the one default the communicator, the plans and
/// the cost model share.
inline constexpr uint64_t kPipelineChunkBytes = uint64_t{1} << 20;

/// Rounds of a plan the executor keeps open at once by default (CONFLUX_EXEC_WINDOW; src/executor.h):
/// round by round, until running ahead measures faster (docs/projections.md, "The latency wall").
inline constexpr int kExecWindowRounds = 1;

/// The largest radix PlanParams::radix (CONFLUX_RHD_RADIX) accepts.
inline constexpr int kMaxRhdRadix = 64;

/// What an algorithm needs to know to build one rank's plan.
struct PlanParams {
  Collective coll = Collective::AllReduce;
  int nranks = 1;
  int rank = 0;
  /// Elements, NCCL's meaning: allreduce/reduce/broadcast the whole vector; allgather per-rank send
  /// count; reducescatter per-rank receive count; alltoall per-peer block.
  uint64_t count = 0;
  uint32_t eltSize = 4;
  int root = 0;                     ///< Reduce and broadcast.
  uint64_t stagingBytes = 0;        ///< Staging bytes a plan may use per rank (direct algorithms chunk to fit).
  uint64_t chunkBytes = kPipelineChunkBytes;  ///< Pipelining granularity for message-passing algorithms.
  /// Largest radix of recursive halving-doubling (rhd, and hier_rhd between nodes): 2 is the classic
  /// pairwise schedule; k exchanges with up to k - 1 peers per step, log_k instead of log2 steps.
  int radix = 2;
  /// Ranks per node (hierarchical algorithms); null: all ranks on one node. Shared, never copied per call.
  std::shared_ptr<const NodeLayout> layout;

  /// Field by field (the layout by identity): the plan cache's key, kept whole as the struct grows.
  bool operator==(const PlanParams&) const = default;
};

/// Byte sizes of the caller's buffers for a collective (recv may be unused on some ranks).
struct BufferSizes {
  uint64_t send = 0;
  uint64_t recv = 0;
};
BufferSizes bufferSizes(const PlanParams& p);

/// One rank's schedule.
struct Plan {
  std::string algorithm;           ///< Name, e.g. "ring".
  std::vector<Op> ops;
  std::vector<BufRef> sources;
  std::vector<Round> rounds;
  uint64_t scratchBytes = 0;       ///< Private scratch the rank needs.
  uint64_t stagingBytes = 0;       ///< Staging bytes the plan uses (0: no staging, no Barrier needed).

  const BufRef& src(const Op& op, uint32_t i) const { return sources[op.firstSrc + i]; }
  /// ReduceSpread's k-th extra destination (k < op.nextra).
  const BufRef& extraDst(const Op& op, uint32_t k) const { return sources[op.firstSrc + op.nsrc + k]; }
};

/// Appends operations to a plan, one round at a time.
class PlanBuilder {
 public:
  explicit PlanBuilder(std::string algorithm) { plan_.algorithm = std::move(algorithm); }

  /// Closes the current round (if it has operations) and starts a new one.
  void nextRound();

  void send(int peer, BufRef src, uint64_t bytes);
  void recv(int peer, BufRef dst, uint64_t bytes);
  void recvReduce(int peer, BufRef dst, BufRef src, uint64_t bytes);
  void barrier();
  void copy(BufRef dst, BufRef src, uint64_t bytes);
  void reduce(BufRef dst, const std::vector<BufRef>& srcs, uint64_t bytes);
  void finalize(BufRef dst, uint64_t bytes);
  /// ReduceSpread: the finished reduction of srcs into dst and into every one of `extra`.
  void reduceSpread(BufRef dst, const std::vector<BufRef>& extra, const std::vector<BufRef>& srcs, uint64_t bytes);

  void needScratch(uint64_t bytes);
  void needStaging(uint64_t bytes);

  /// Closes the last round and returns the plan.
  Plan finish();

 private:
  void add(const Op& op);
  Plan plan_;
  uint32_t roundStart_ = 0;
};

}  // namespace conflux
