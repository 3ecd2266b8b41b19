// RankExecutor: one rank running one plan, with the round semantics of executor.h. Internal to the
// executor's three files: executor.cc (the dataflow loop, streams to the local group, local operations),
// executor_net.cc (messages to and from other nodes), executor_health.cc (failure detection, argument
// checks, the text that says where a call stopped). The hot helpers stay inline here.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/copy_bytes.h"
#include "algorithms/op_graph.h"
#include "src/call_check.h"
#include "src/executor.h"
#include "src/wait.h"

namespace conflux::exec {

using Clock = WaitClock;
using OpState = ExecWorkspace::OpState;

// Messages at least this large are copied into the caller's receive buffer with non-temporal stores.
constexpr uint64_t kStreamMessageBytes = uint64_t{8} << 20;
// Out-of-place messages at least this large whose receive buffer is cold (ExecCall::recvCold) are
// copied into it with non-temporal stores too. Below this a call is mostly latency.
constexpr uint64_t kColdStreamBytes = uint64_t{256} << 10;
// Out-of-place messages at least this large are written into peers' buffers (direct plans) with
// non-temporal stores: those lines are cold here, and streaming skips reading them in. In place, the
// lines were just read from the same buffer, so ordinary stores are cheaper.
constexpr uint64_t kStreamToPeerBytes = uint64_t{1} << 20;

class RankExecutor {
 public:
  RankExecutor(const Plan& plan, const OpGraph& graph, const ExecBuffers& bufs, const ExecCall& call,
               const ExecEnv& env, ExecWorkspace& work)
      : plan_(plan), bufs_(bufs), call_(call), env_(env), local_(env.local),
        eltSize_(dataTypeSize(call.dtype)), reduce_(cpu::reduceFunction(call.dtype, call.op)),
        premul_(call.op == RedOp::PreMulSum ? cpu::premulSumFunction(call.dtype) : nullptr),
        states_(work.states), peerChecked_(work.peerChecked), srcPtrs_(work.srcPtrs), work_(work),
        streamToRecv_(call.count * eltSize_ >= kStreamMessageBytes ||
                      (call.recvCold && call.count * eltSize_ >= kColdStreamBytes)),
        streamToPeers_(bufs.send != bufs.recv && call.count * eltSize_ >= kStreamToPeerBytes),
        streamStaging_(env.streamStaging == ExecEnv::StreamStaging::Always ||
                       (env.streamStaging == ExecEnv::StreamStaging::WhenFar && env.local != nullptr &&
                        env.local->coresFarApart())),
        graph_(graph), windowRounds_(static_cast<uint32_t>(std::max(1, env.windowRounds))) {
    peerChecked_.assign(env.nranks, 0);
    if (env.net != nullptr) {
      work.netSent.assign(env.nranks, 0);
      work.netRecvd.assign(env.nranks, 0);
      work.p2pSent.resize(env.nranks, 0);  // kept from call to call
      work.p2pRecvd.resize(env.nranks, 0);
    }
  }
  Status run();

 private:
  // ---- buffers ----
  bool isPeer(const BufRef& ref) const { return ref.rank >= 0 && ref.rank != env_.rank; }
  // A peer on another node: its messages travel over the message transport.
  bool isRemote(int peer) const { return env_.links[peer].via == PeerTransport::Network; }
  // PreMulSum: reads of this rank's own input are scaled.
  bool scaled(const BufRef& ref) const { return premul_ != nullptr && ref.kind == BufKind::Send && !isPeer(ref); }
  /// Sent to or received from another node, `op` passes through bounce memory: a RecvReduce lands there,
  /// and a PreMulSum send from the own input is scaled there first.
  bool usesBounce(const Op& op) const {
    return op.kind == OpKind::RecvReduce || (op.kind == OpKind::Send && scaled(plan_.src(op, 0)));
  }

  /// dst = the reduction of `count` elements of srcs; PreMulSum multiplies the sources whose bit is set in
  /// `scaledMask` (those read from this rank's own input) by the call's scalar.
  void combine(void* dst, const void* const* srcs, int nsrc, size_t count, uint64_t scaledMask) const {
    if (scaledMask != 0) premul_(dst, srcs, nsrc, count, scaledMask, call_.scalar);
    else reduce_(dst, srcs, nsrc, count);
  }
  /// A local copy to `ref` (resolved: dst). Pieces of a message far larger than the caches, or of one
  /// whose receive buffer is cold (ExecCall::recvCold), go to the caller's buffer with non-temporal
  /// stores: the lines are not in cache (or would be evicted before anyone reads them), and streaming
  /// skips the reads that ordinary stores cause (read-for-ownership). Copies into staging stream too
  /// with CONFLUX_SHM_STREAM_STAGING=1, and with auto while the cores are far apart (streamStaging_): the
  /// peer then reads them from memory, not from this core's cache, which is faster there. A call with single-copy reads
  /// (taken only on warm buffers, src/direct_call.h) copies into its warm receive buffer with ordinary
  /// stores at every size below that (memcpy, which streams on its own only beyond a large share of the
  /// last-level cache): cpu::copy would stream from 1 MiB and push the warm lines out to memory.
  void copyOut(const BufRef& ref, std::byte* dst, const std::byte* src, uint64_t bytes) const {
    if (src == dst) return;
    const bool stream = (ref.kind == BufKind::Recv && streamToRecv_) || (isPeer(ref) && streamToPeers_) ||
                        (ref.kind == BufKind::Staging && streamStaging_);
    if (stream) {
      cpu::copyStreaming(dst, src, bytes);
      work_.streamedBytes += bytes;
    } else if (bufs_.peerProcess != nullptr && ref.kind == BufKind::Recv && !call_.recvCold) {
      copyBytes(dst, src, bytes);
    } else {
      cpu::copy(dst, src, bytes);
    }
  }
  /// dst = `bytes` of src multiplied by the call's PreMulSum scalar.
  void scaleCopy(void* dst, const void* src, uint64_t bytes) const {
    premul_(dst, &src, 1, bytes / eltSize_, 1, call_.scalar);
  }
  /// transport::SendChannel::Transform scaling whole elements by the call's scalar (ctx: this executor).
  static void scaleInto(void* dst, const void* src, size_t bytes, const void* ctx) {
    static_cast<const RankExecutor*>(ctx)->scaleCopy(dst, src, bytes);
  }

  std::byte* resolve(const BufRef& ref) const {
    uintptr_t base = 0;
    switch (ref.kind) {
      case BufKind::Send:
        base = reinterpret_cast<uintptr_t>(isPeer(ref) ? bufs_.peerSend[ref.rank] : bufs_.send);
        break;
      case BufKind::Recv:
        base = reinterpret_cast<uintptr_t>(isPeer(ref) ? bufs_.peerRecv[ref.rank] : bufs_.recv);
        break;
      case BufKind::Scratch: base = reinterpret_cast<uintptr_t>(bufs_.scratch); break;
      case BufKind::Staging: {
        int owner = ref.rank < 0 ? env_.rank : ref.rank;
        base = reinterpret_cast<uintptr_t>(local_->staging(env_.localIndex[owner], call_.stagingEpoch));
        break;
      }
    }
    // Integer arithmetic: point-to-point batches use a null base with absolute offsets.
    return reinterpret_cast<std::byte*>(base + ref.offset);
  }

  // ---- the dataflow loop (executor.cc) ----
  /// The op at program position `pos` may start: what it depends on completed, the message before it on
  /// its channel completed (a stream to a node member) or was posted (a message to another node), and a
  /// Barrier is the oldest unfinished operation.
  bool ready(uint32_t i, uint32_t pos) const;
  /// Starts op i: runs a local operation, arrives at a barrier, posts a message to another node (false
  /// when its round's bounce block is not reserved yet: it stays unstarted).
  bool start(uint32_t i, const Op& op, OpState& st);
  /// One pass over the window: starts what is ready and moves the started messages. True if anything
  /// moved; allDone when every operation of the plan completed.
  bool progress(bool& allDone);
  bool progressSend(const Op& op, OpState& st);
  bool progressRecv(const Op& op, OpState& st);
  void completed(const Op& op, OpState& st);
  /// Moves the window's start past completed operations and its end to the rounds it may open.
  void slideWindow();
  void runLocal(const Op& op);
  /// The process whose memory `ref` (a peer's send buffer) must be read from with process_vm_readv, or 0.
  int peerProcessOf(const BufRef& ref) const {
    return bufs_.peerProcess != nullptr && isPeer(ref) && ref.kind == BufKind::Send ? bufs_.peerProcess[ref.rank] : 0;
  }
  /// A Copy from a peer's private send buffer: one kernel copy. On failure sets netFailed_.
  void copyFromPeerProcess(int pid, const BufRef& ref, std::byte* dst, const std::byte* remote, uint64_t bytes);

  // ---- messages to and from other nodes (executor_net.cc) ----
  /// Lays out the call's bounce memory: per round, the bytes its RecvReduce operations from other nodes
  /// receive into and (PreMulSum) its messages sent straight from the own input are scaled into first.
  void planBounce();
  /// Releases the blocks of finished rounds and reserves, in round order, those of the rounds the window
  /// opened, stopping at the first that does not fit yet (earlier blocks are still in use).
  void reserveBounce();
  /// Posts op i (a message to or from another node) to the transport with its tag.
  Status postNet(uint32_t i, const Op& op);
  /// Adds a message to the communicator's message counters (metrics on).
  void countTraffic(const Op& op);
  bool progressNet(uint32_t i, const Op& op, OpState& st);
  /// Grows a bounce buffer; the transport forgets the old one first (it may hold registrations of it).
  void growBounce(std::vector<std::byte>& buf, uint64_t bytes);
  void progressNetQueues() { env_.net->progress(); }
  void pollNet(Clock::time_point until) { env_.net->poll(until); }
  Status failNet();
  /// A count that changes while the started inter-node operations move bytes: their messages' bytes as
  /// they move, before they complete (transport::RequestState::movedBytes), and the transport's activity
  /// on the connections with the peers still waited for (MessageTransport::linkActivity).
  uint64_t netBytesMoved() const;

  // ---- failure detection (executor_health.cc) ----
  /// Calls fn(i, op, state) for each started, unfinished communication operation of the window, in
  /// program order, until it returns true.
  template <class Fn>
  bool anyWaiting(Fn&& fn) const {
    for (uint32_t pos = lo_; pos < hi_; ++pos) {
      const uint32_t i = graph_.order[pos];
      const Op& op = plan_.ops[i];
      const OpState& st = states_[i];
      if (st.started && !st.complete && isCommOp(op.kind) && fn(i, op, st)) return true;
    }
    return false;
  }
  std::string where() const;
  Status fail(const Status& s, int failedRank) { return reportFailure(env_, s, failedRank); }
  Status checkHealth();

  // True when an unfinished operation needs global rank g (its peer, or a barrier it has not reached
  // yet).
  bool waitsFor(int g) const;
  /// The latest progress of the ranks an unfinished operation waits for: members of this node (a stream's
  /// peer, a barrier's laggards, as published in the same call, with the hops the time came through) and
  /// ranks on other nodes (as they told it, with the hops the time came through, plus one); the epoch
  /// when none.
  struct WaitedProgress {
    Clock::time_point local{};
    uint32_t localHops = 0;
    Clock::time_point remote{};
    uint32_t remoteHops = 0;
  };
  WaitedProgress waitedProgress() const;
  /// Progress at `t` that came through `hops` notices: this rank's own timer takes it; what it publishes
  /// and tells takes it only below kMaxProgressHops.
  void takeProgress(Clock::time_point t, uint32_t hops);
  /// This rank's own progress, now.
  void ownProgress(Clock::time_point now) { takeProgress(now, 0); }
  /// Tells the ranks on other nodes this rank exchanges messages with in the plan how long ago it last
  /// progressed (MessageTransport::tellProgress), every quarter of the timeout once the call has lasted
  /// that long.
  void tellOtherNodes(Clock::time_point now);
  int stuckPeer() const;

  // ---- cross-rank argument checks ----
  transport::CallDescriptor descriptor() const {
    return describeCall(call_.seq, call_.coll, call_.dtype, call_.op, call_.root, call_.count);
  }
  void publishCall() { local_->publishCall(descriptor()); }
  Status checkPeerArgs();
  std::string mismatch(const transport::CallDescriptor& d) const { return callMismatch(descriptor(), d); }

  const Plan& plan_;
  const ExecBuffers& bufs_;
  const ExecCall& call_;
  const ExecEnv& env_;
  transport::LocalGroup* local_;
  const size_t eltSize_;
  const cpu::ReduceFn reduce_;
  const cpu::PremulFn premul_;  // PreMulSum only
  std::vector<OpState>& states_;
  std::vector<uint8_t>& peerChecked_;
  std::vector<const void*>& srcPtrs_;
  ExecWorkspace& work_;
  const bool streamToRecv_;
  const bool streamToPeers_;
  const bool streamStaging_;  // copies into staging stream (ExecEnv::streamStaging, decided per call)
  const OpGraph& graph_;
  const uint32_t windowRounds_;
  // The window: program positions [lo_, hi_). lo_ is the oldest unfinished operation; hi_ the end of the
  // last round the window opens (windowRounds_ rounds from lo_'s).
  uint32_t lo_ = 0;
  uint32_t hi_ = 0;
  size_t round_ = 0;         // lo_'s round
  uint32_t nextBlock_ = 0;   // the first round whose bounce block is not reserved yet (reserveBounce)
  int netPending_ = 0;       // posted inter-node operations not yet complete
  bool localPending_ = false;  // started operations with local-group members not yet complete (last progress)
  bool netFailed_ = false;   // one failed (or a single-copy read of a local peer): netError_ names the peer and the operation
  Status netError_;
  int netPeer_ = -1;
  Clock::time_point publishedProgress_{};  // what this rank last published to its node (publishProgress)
  uint64_t netMovedSeen_ = 0;   // netBytesMoved() when the no-progress timer last looked
  bool netMovedKnown_ = false;  // netMovedSeen_ was read since the last message was posted (postNet clears it)
  Clock::time_point lastProgress_{};  // the latest progress this rank knows of: its timer
  Clock::time_point passable_{};      // the latest of it that came through fewer than kMaxProgressHops notices
  uint32_t passableHops_ = 0;         // ... and through how many
  Clock::time_point lastLiveness_{};
  Clock::time_point callStart_{};  // when run() began
  Clock::time_point lastTold_{};   // tellOtherNodes' last notices
  std::vector<int> tellPeers_;     // the ranks on other nodes this rank exchanges messages with in the plan
  bool tellPeersKnown_ = false;    // tellPeers_ was computed
};

}  // namespace conflux::exec
