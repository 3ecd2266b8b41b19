// The executor: runs one rank's Plan over its links to the other ranks (ExecEnv::links: the byte streams
// of the node's local group, transport/local_group.h, or the message transport, transport/transport.h,
// for ranks on other nodes) and the CPU kernels. It knows the two interfaces only, not the transports
// behind them.
//
// It implements the round semantics of plan.h as a dataflow (algorithms/op_graph.h): an operation starts
// as soon as the earlier ones it depends on (the same bytes, one of them writing; a Barrier orders all)
// completed, up to ExecEnv::windowRounds rounds ahead of the oldest unfinished one, so that a segment's next
// step need not wait for every other message of its round (each waits for its own latency, not the
// round's slowest). Messages to one peer keep their order (streamed in pieces so that receivers reduce
// while senders still write); local operations run when their inputs are ready. A message to or from another
// node is posted whole to the message transport when it may start (the transport chunks it); a
// collective's tag is the call number and the message's index among this call's messages in that
// direction with that peer, so both sides match messages in plan order; a point-to-point message's is its
// number among all point-to-point messages between the pair in that direction (transport::p2pTag). A
// RecvReduce from another node lands in a bounce buffer and is reduced when it completes. For PreMulSum
// every read of the rank's own input is scaled on the way (kernels/cpu/reduce.h PremulFn; a message to
// another node straight from the input is scaled into a bounce buffer first). A rank that cannot progress
// spins briefly and then sleeps on its doorbell (or polls the message transport while messages are in
// flight); while it waits it watches for dead peers, errors posted by other ranks, an abort, mismatched
// arguments and the no-progress timeout, so that a failure anywhere becomes an error on every rank
// instead of a hang.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/op_graph.h"
#include "algorithms/plan.h"
#include "core/error.h"
#include "core/transport_select.h"
#include "core/types.h"
#include "kernels/cpu/reduce.h"
#include "src/flight_recorder.h"
#include "src/traffic_counters.h"
#include "transport/transport.h"
#include "transport/local_group.h"

namespace conflux {

/// The caller's buffers for one call. For point-to-point batches send/recv are null and BufRef offsets
/// are absolute addresses.
struct ExecBuffers {
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;
  std::byte* scratch = nullptr;
  MemSpace space = MemSpace::Host;
  /// Direct plans: every rank's send and recv buffer as mapped in this process, by global rank.
  const std::byte* const* peerSend = nullptr;
  std::byte* const* peerRecv = nullptr;
  /// Direct plans with single-copy reads (src/direct_call.h): by global rank, the process whose address
  /// peerSend holds (the buffer is read with process_vm_readv, never dereferenced), or 0 where peerSend
  /// is mapped here. Only plans that merely copy from peers' send buffers run with it.
  const int* peerProcess = nullptr;
};

/// Everything about the call that the plan does not say.
struct ExecCall {
  Collective coll = Collective::AllReduce;
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  int root = 0;
  uint64_t count = 0;
  /// 1-based number of the collective on the communicator, the same on every rank (argument checks and
  /// network tags use it). 0 for a point-to-point batch (coll SendRecv), which only some ranks make:
  /// its messages match by their number between the pair instead (ExecWorkspace::p2pSent).
  uint64_t seq = 0;
  uint64_t p2pBatch = 0;      ///< SendRecv: this rank's 1-based batch number (for messages only).
  uint64_t stagingEpoch = 0;  ///< Picks one of the two staging areas (plans using staging only).
  /// PreMulSum: this rank's scalar (one value of dtype, host memory). Every read of this rank's own Send
  /// buffer multiplies by it (Copy, Reduce and RecvReduce sources, Send messages), so the plan itself is a
  /// plain sum. Plans of peers' buffers (BufRef::peerSend) are not run for PreMulSum.
  const void* scalar = nullptr;
  /// Out of place, the receive buffer is likely not in cache (RecentBuffers): copies into it of calls
  /// from kColdStreamBytes stream (non-temporal stores), as those of calls from kStreamMessageBytes do.
  bool recvCold = false;
  /// The flight recorder's entry of this call: notes the round and peer it blocks on (slow path only).
  TraceCursor trace;
  /// The plan's dataflow graph for this call's buffers (algorithms/op_graph.h: built with the send
  /// buffer's place in the receive buffer when they alias); null: execute() builds one for the call.
  const OpGraph* graph = nullptr;
};

/// How this rank reaches one rank of the communicator, set once per communicator from the per-peer
/// choice (core/transport_select.h) by linkPeers (src/peer_links.h). This rank's own entry says Local
/// and has no streams.
struct PeerLink {
  /// Local: through the byte streams below; Network: through ExecEnv::net, the one message transport.
  PeerTransport via = PeerTransport::Local;
  /// A member of this node's local group: the byte streams to and from it.
  transport::SendChannel* out = nullptr;
  transport::RecvChannel* in = nullptr;
};

/// Long-lived state the executor needs from the communicator.
struct ExecEnv {
  /// The ranks of this node (this rank included; a group of one when it is alone on its node).
  transport::LocalGroup* local = nullptr;
  int rank = 0;
  int nranks = 1;
  std::vector<int> localIndex;    ///< Global rank -> local rank, -1 for ranks on other nodes.
  std::vector<int> globalOfLocal; ///< Local rank -> global rank.
  int timeoutMs = 30000;
  int spinCount = 2000;
  int64_t spinNs = 0;             ///< After spinCount polls, polling goes on this long (CONFLUX_SPIN_US).
  /// Copies into staging use non-temporal stores (CONFLUX_SHM_STREAM_STAGING): Never, Always, or
  /// WhenFar: while LocalGroup::coresFarApart() (judged per call, when the executor starts it).
  enum class StreamStaging { Never, Always, WhenFar } streamStaging = StreamStaging::Never;
  int yieldCount = 0;             ///< sched_yield() calls before sleeping (oversubscribed nodes).
  /// Oversubscribed nodes: polls an eager call makes before yielding while every rank it waits for last
  /// ran on another CPU (CONFLUX_OVERSUBSCRIBED_REMOTE_SPIN_COUNT; 0 where not oversubscribed).
  int remoteSpinCount = 0;
  bool checkArgs = true;
  /// Rounds of a plan open at once (CONFLUX_EXEC_WINDOW): an operation starts when what it depends on
  /// completed, at most this many rounds after the oldest unfinished one; 1 runs round by round.
  int windowRounds = kExecWindowRounds;
  const std::atomic<bool>* aborted = nullptr;
  /// Peers on other nodes (localIndex < 0) are reached through this (the communicator's transport::Network,
  /// or a test's fake); null when all ranks are local.
  transport::MessageTransport* net = nullptr;
  /// By global rank: how this rank reaches it (linkPeers in src/peer_links.h).
  std::vector<PeerLink> links;
  /// The communicator's message counters (src/traffic_counters.h); null when metrics are off.
  TrafficCounters* traffic = nullptr;
};

/// Memory the executor reuses from call to call (one per communicator), so that a call allocates nothing.
struct ExecWorkspace {
  struct OpState {
    uint64_t done = 0;        ///< Wire bytes moved (Send/Recv/RecvReduce).
    uint64_t generation = 0;  ///< Barrier generation to wait for.
    bool started = false;     ///< Its dependencies completed and it began (messages: posted or streaming).
    bool complete = false;
    bool waited = false;      ///< Barrier: polled at least once before it completed.
  };
  std::vector<OpState> states;
  std::vector<uint8_t> peerChecked;
  std::vector<const void*> srcPtrs;
  /// The eager slots of `eagerWorld`'s members, parity 0 then 1 (src/eager.cc), looked up once: an
  /// 8-byte call's time is a few hundred nanoseconds, and a virtual call per poll showed in its profile.
  const void* eagerWorld = nullptr;
  std::vector<void*> eagerSlots;
  // Inter-node messages: one request per operation of the plan, message counters per peer for the
  // current call, and the bounce memory RecvReduce operations from other nodes receive into, and PreMulSum
  // sends from the own input are scaled into (grows, never shrinks). Each round that needs bounce memory
  // reserves one block of it, in round order, as a ring (blocks are released in order once their
  // operations completed).
  std::vector<transport::Request> netReqs;
  std::vector<uint64_t> bounceOffset;  // by op: its place in its round's block (roundBlock adds the block's start)
  std::vector<uint64_t> roundBounce;   // by round: bytes of its block (0: none)
  std::vector<int64_t> roundBlock;     // by round: its block's start in bounce, -1 while unreserved
  std::vector<uint32_t> roundBounced;  // by round: bounced operations not complete yet
  struct BounceBlock {
    uint32_t round;
    uint64_t start, end;
  };
  std::vector<BounceBlock> blocks;     // reserved, oldest first (a queue: blocks[blocksHead..])
  size_t blocksHead = 0;
  std::vector<uint32_t> netSent, netRecvd;
  // Point-to-point messages to and from each rank on another node so far, over every batch: the k-th
  // send from A to B matches B's k-th receive from A, whatever calls or groups they were posted in.
  std::vector<uint64_t> p2pSent, p2pRecvd;
  std::vector<std::byte> bounce;
  /// The graph execute() built for a call that brought none.
  OpGraph graph;
  /// Bytes written with non-temporal stores into this rank's and peers' receive buffers, over every call
  /// (a statistic: tests check which calls stream).
  uint64_t streamedBytes = 0;
};

/// Posts `s` to every local rank's error slot (naming `failedRank`, or -1), logs it, and returns it.
Status reportFailure(const ExecEnv& env, const Status& s, int failedRank);

/// A call idle for `idleMs` at `where`, waiting for rank `waitedFor` (-1: unknown), timed out: reports it
/// (reportFailure) naming the rank to blame, which is a stopped process of this node when there is one
/// (ranks wait on each other in chains, and the one at the end is the culprit), else `waitedFor`.
Status reportTimeout(const ExecEnv& env, int64_t idleMs, const std::string& where, int waitedFor);

/// CONFLUX_SHM_STREAM_STAGING as a policy: auto WhenFar, 1/true/yes/on Always, 0/false/no/off Never.
/// Throws Error(InvalidArgument) naming the variable for anything else.
ExecEnv::StreamStaging streamStagingFromConfig();

/// Runs `plan` for this rank. Returns Ok, or the first error (also posted to every local rank).
Status execute(const Plan& plan, const ExecBuffers& bufs, const ExecCall& call, const ExecEnv& env,
               ExecWorkspace& work);

}  // namespace conflux
