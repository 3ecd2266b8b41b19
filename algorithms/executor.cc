#include "algorithms/executor.h"

#include <chrono>
#include <cstring>
#include <string>

#include "algorithms/call_check.h"
#include "algorithms/wait.h"
#include "core/log.h"

namespace conflux {
namespace {

using Clock = WaitClock;

// Every message occupies a multiple of 8 bytes of its channel, so each message starts 8-byte aligned and
// no element (at most 8 bytes) ever straddles the ring's end. Both sides know the sizes from the plan.
constexpr uint64_t kWireAlign = 8;
constexpr uint64_t wireBytes(uint64_t b) { return (b + kWireAlign - 1) & ~(kWireAlign - 1); }
constexpr std::byte kZeros[kWireAlign] = {};

// With messages to or from other nodes in flight nobody rings the doorbell for their completions: a
// waiting rank blocks on the transport's completion queues instead, this long at a time, so that shared-
// memory peers and the health checks are still looked at often.
constexpr Clock::duration kNetWait = std::chrono::milliseconds(1);
// While shared-memory operations of the round are also unfinished: a peer's write rings the shared-memory
// doorbell, which a rank blocked on the network's wait objects cannot hear, so it looks again this soon
// (hierarchical plans mix both kinds in every round).
constexpr Clock::duration kMixedNetWait = std::chrono::microseconds(50);
// Bounce-buffer regions of one round start at multiples of this.
constexpr uint64_t kBounceAlign = 64;

// Messages at least this large are copied into the caller's receive buffer with non-temporal stores.
constexpr uint64_t kStreamMessageBytes = uint64_t{8} << 20;
// Out-of-place messages at least this large are written into peers' buffers (direct plans) with
// non-temporal stores: those lines are cold here, and streaming skips reading them in. In place, the
// lines were just read from the same buffer, so ordinary stores are cheaper.
constexpr uint64_t kStreamToPeerBytes = uint64_t{1} << 20;

using OpState = ExecWorkspace::OpState;

class RankExecutor {
 public:
  RankExecutor(const Plan& plan, const ExecBuffers& bufs, const ExecCall& call, const ExecEnv& env,
               ExecWorkspace& work)
      : plan_(plan), bufs_(bufs), call_(call), env_(env), world_(env.world),
        eltSize_(dataTypeSize(call.dtype)), reduce_(cpu::reduceFunction(call.dtype, call.op)),
        premul_(call.op == RedOp::PreMulSum ? cpu::premulSumFunction(call.dtype) : nullptr),
        states_(work.states), sendBusy_(work.sendBusy), recvBusy_(work.recvBusy),
        peerChecked_(work.peerChecked), srcPtrs_(work.srcPtrs), work_(work),
        streamToRecv_(call.count * eltSize_ >= kStreamMessageBytes),
        streamToPeers_(bufs.send != bufs.recv && call.count * eltSize_ >= kStreamToPeerBytes) {
    sendBusy_.assign(env.nranks, 0);
    recvBusy_.assign(env.nranks, 0);
    peerChecked_.assign(env.nranks, 0);
    if (env.net != nullptr) {
      work.netSent.assign(env.nranks, 0);
      work.netRecvd.assign(env.nranks, 0);
      work.p2pSent.resize(env.nranks, 0);  // kept from call to call
      work.p2pRecvd.resize(env.nranks, 0);
    }
  }

  Status run() {
    // Point-to-point batches are made by some ranks only: nothing to compare them with.
    const bool checked = world_ != nullptr && env_.checkArgs && call_.seq != 0;
    if (checked) publishCall();
    for (size_t r = 0; r < plan_.rounds.size(); ++r) {
      round_ = r;
      Status s = runRound(plan_.rounds[r]);
      if (!s) return s;
    }
    if (checked) {
      Status s = checkPeerArgs();
      if (!s) return fail(s, -1);
    }
    return Status::ok();
  }

 private:
  // ---- buffers ----
  bool isPeer(const BufRef& ref) const { return ref.rank >= 0 && ref.rank != env_.rank; }
  // A peer on another node: its messages travel over the message transport.
  bool isRemote(int peer) const { return env_.localIndex[peer] < 0; }
  // PreMulSum: reads of this rank's own input are scaled.
  bool scaled(const BufRef& ref) const { return premul_ != nullptr && ref.kind == BufKind::Send && !isPeer(ref); }

  /// dst = the reduction of `count` elements of srcs; PreMulSum multiplies the sources whose bit is set in
  /// `scaledMask` (those read from this rank's own input) by the call's scalar.
  void combine(void* dst, const void* const* srcs, int nsrc, size_t count, uint64_t scaledMask) const {
    if (scaledMask != 0) premul_(dst, srcs, nsrc, count, scaledMask, call_.scalar);
    else reduce_(dst, srcs, nsrc, count);
  }
  /// dst = `bytes` of src multiplied by the call's PreMulSum scalar.
  void scaleCopy(void* dst, const void* src, uint64_t bytes) const {
    premul_(dst, &src, 1, bytes / eltSize_, 1, call_.scalar);
  }
  /// SendChannel::Transform scaling whole elements by the call's scalar (ctx: this executor).
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
        base = reinterpret_cast<uintptr_t>(world_->staging(env_.localIndex[owner], call_.stagingEpoch));
        break;
      }
    }
    // Integer arithmetic: point-to-point batches use a null base with absolute offsets.
    return reinterpret_cast<std::byte*>(base + ref.offset);
  }

  // ---- one round ----
  Status runRound(const Round& round) {
    states_.assign(round.numOps, OpState{});
    for (uint32_t i = 0; i < round.numOps; ++i) {
      const Op& op = plan_.ops[round.firstOp + i];
      if (op.kind == OpKind::Barrier) states_[i].generation = world_->barrierArrive();
    }
    netPending_ = 0;
    if (env_.net != nullptr) {
      if (Status s = postNet(round); !s) return fail(s, -1);
    }
    Backoff backoff(env_);
    bool progressedSinceCheck = false;
    lastProgress_ = Clock::now();
    for (;;) {
      bool allDone = true;
      bool progressed = progressComm(round, allDone);
      if (netFailed_) return failNet(round);
      if (allDone) break;
      if (progressed) {
        backoff.progressed();
        progressedSinceCheck = true;
        continue;
      }
      if (backoff.pause()) continue;
      // Reading the clock only here keeps it off the fast path.
      if (progressedSinceCheck) {
        lastProgress_ = Clock::now();
        progressedSinceCheck = false;
      }
      // Read the doorbell before the last check so that a ring in between is not lost.
      uint32_t seen = world_->doorbell();
      allDone = true;
      if (progressComm(round, allDone)) {
        backoff.respin();
        progressedSinceCheck = true;
        continue;
      }
      if (netFailed_) return failNet(round);
      if (allDone) break;
      Status s = checkHealth(round);
      if (!s) return s;
      if (netPending_ > 0) {
        // Network completions ring no doorbell: block on the transport instead, briefly, so that
        // shared-memory peers of this round are not left waiting long.
        pollNet(Clock::now() + (shmPending_ ? kMixedNetWait : kNetWait));
      } else {
        world_->sleep(seen, kMaxSleepMs);
      }
      backoff.woke();
    }
    for (uint32_t i = 0; i < round.numOps; ++i) {
      const Op& op = plan_.ops[round.firstOp + i];
      if (!isCommOp(op.kind)) runLocal(op);
    }
    return Status::ok();
  }

  bool progressComm(const Round& round, bool& allDone) {
    bool progressed = false;
    shmPending_ = false;
    std::fill(sendBusy_.begin(), sendBusy_.end(), 0);
    std::fill(recvBusy_.begin(), recvBusy_.end(), 0);
    if (netPending_ > 0) progressNetQueues();
    for (uint32_t i = 0; i < round.numOps; ++i) {
      const Op& op = plan_.ops[round.firstOp + i];
      OpState& st = states_[i];
      if (st.complete || !isCommOp(op.kind)) continue;
      if (op.kind != OpKind::Barrier && isRemote(op.peer)) {
        progressed |= progressNet(op, st, i);
        if (!st.complete) allDone = false;
        continue;
      }
      switch (op.kind) {
        case OpKind::Send:
          // Messages to one peer leave in listed order: only the first unfinished one moves.
          if (!sendBusy_[op.peer]) progressed |= progressSend(op, st);
          if (!st.complete) sendBusy_[op.peer] = 1;
          break;
        case OpKind::Recv:
        case OpKind::RecvReduce:
          if (!recvBusy_[op.peer]) progressed |= progressRecv(op, st);
          if (!st.complete) recvBusy_[op.peer] = 1;
          break;
        case OpKind::Barrier:
          if (world_->barrierReached(st.generation)) {
            st.complete = true;
            progressed = true;
          }
          break;
        default:
          break;
      }
      if (!st.complete) {
        allDone = false;
        shmPending_ = true;
      }
    }
    return progressed;
  }

  bool progressSend(const Op& op, OpState& st) {
    shm::SendChannel& ch = world_->sendTo(env_.localIndex[op.peer]);
    const uint64_t total = wireBytes(op.bytes);
    const std::byte* src = resolve(plan_.src(op, 0));
    const bool scale = scaled(plan_.src(op, 0));
    bool progressed = false;
    while (st.done < total) {
      size_t n;
      if (st.done < op.bytes) {
        n = scale ? ch.writeTransformed(src + st.done, op.bytes - st.done, eltSize_, &scaleInto, this)
                  : ch.write(src + st.done, op.bytes - st.done);
      } else {
        n = ch.write(kZeros, total - st.done);
      }
      if (n == 0) break;
      st.done += n;
      progressed = true;
    }
    st.complete = st.done == total;
    return progressed;
  }

  bool progressRecv(const Op& op, OpState& st) {
    shm::RecvChannel& ch = world_->recvFrom(env_.localIndex[op.peer]);
    const uint64_t total = wireBytes(op.bytes);
    std::byte* dst = resolve(op.dst);
    bool progressed = false;
    while (st.done < total) {
      std::span<const std::byte> in = ch.readable(total - st.done);
      if (in.empty()) break;
      size_t take = in.size();
      if (st.done < op.bytes) {
        uint64_t dataLeft = op.bytes - st.done;
        take = std::min<uint64_t>(take, dataLeft);
        if (op.kind == OpKind::RecvReduce) {
          take -= take % eltSize_;  // whole elements only; the rest follows
          if (take == 0) break;
          const void* srcs[2] = {resolve(plan_.src(op, 0)) + st.done, in.data()};
          combine(dst + st.done, srcs, 2, take / eltSize_, scaled(plan_.src(op, 0)) ? 1 : 0);
        } else {
          std::memcpy(dst + st.done, in.data(), take);
        }
      }
      ch.consume(take);
      st.done += take;
      progressed = true;
    }
    st.complete = st.done == total;
    return progressed;
  }

  // ---- messages to and from other nodes ----
  // Posts every inter-node operation of the round to the transport, in plan order, and lays out the
  // bounce buffers: one for RecvReduce operations, and for PreMulSum one for the messages sent straight
  // from the own input, which are scaled there first (offsets[i]: the op's place in its buffer).
  Status postNet(const Round& round) {
    auto& reqs = work_.netReqs;
    auto& offsets = work_.bounceOffset;
    reqs.assign(round.numOps, transport::Request{});
    offsets.assign(round.numOps, 0);
    uint64_t bounceBytes = 0, scaledBytes = 0;
    for (uint32_t i = 0; i < round.numOps; ++i) {
      const Op& op = plan_.ops[round.firstOp + i];
      uint64_t* end = op.kind == OpKind::RecvReduce                            ? &bounceBytes
                      : op.kind == OpKind::Send && scaled(plan_.src(op, 0)) ? &scaledBytes
                                                                               : nullptr;
      if (end == nullptr || !isRemote(op.peer)) continue;
      offsets[i] = *end;
      *end += (op.bytes + kBounceAlign - 1) / kBounceAlign * kBounceAlign;
    }
    // Every inter-node operation of earlier rounds has completed, so nothing is posted into the old
    // buffers when they grow.
    growBounce(work_.bounce, bounceBytes);
    growBounce(work_.scaledBounce, scaledBytes);
    for (uint32_t i = 0; i < round.numOps; ++i) {
      const Op& op = plan_.ops[round.firstOp + i];
      if (!isCommOp(op.kind)) continue;
      if (op.kind == OpKind::Barrier) {
        return Status(Code::InternalError, "plan " + plan_.algorithm +
                                               " has a barrier, but ranks span nodes (barriers are shared-memory only)");
      }
      if (!isRemote(op.peer)) continue;
      const bool send = op.kind == OpKind::Send;
      uint64_t tag = 0;
      if (call_.seq == 0) {
        tag = transport::p2pTag(send ? work_.p2pSent[op.peer]++ : work_.p2pRecvd[op.peer]++);
      } else {
        tag = transport::collectiveTag(send ? work_.netSent[op.peer]++ : work_.netRecvd[op.peer]++, static_cast<uint32_t>(call_.seq));
      }
      if (op.kind == OpKind::Send && scaled(plan_.src(op, 0))) {
        std::byte* out = work_.scaledBounce.data() + offsets[i];
        scaleCopy(out, resolve(plan_.src(op, 0)), op.bytes);
        reqs[i] = env_.net->isend(op.peer, tag, out, op.bytes);
      } else if (op.kind == OpKind::Send) {
        reqs[i] = env_.net->isend(op.peer, tag, resolve(plan_.src(op, 0)), op.bytes);
      } else if (op.kind == OpKind::Recv) {
        reqs[i] = env_.net->irecv(op.peer, tag, resolve(op.dst), op.bytes);
      } else {
        reqs[i] = env_.net->irecv(op.peer, tag, work_.bounce.data() + offsets[i], op.bytes);
      }
      ++netPending_;
    }
    return Status::ok();
  }

  bool progressNet(const Op& op, OpState& st, uint32_t i) {
    transport::Request& req = work_.netReqs[i];
    if (!req.done()) return false;
    if (req.failed()) {
      if (!netFailed_) {
        netFailed_ = true;
        netError_ = req.status();
        netPeer_ = op.peer;
      }
      return false;
    }
    if (op.kind == OpKind::RecvReduce && op.bytes > 0) {
      const void* srcs[2] = {resolve(plan_.src(op, 0)), work_.bounce.data() + work_.bounceOffset[i]};
      combine(resolve(op.dst), srcs, 2, op.bytes / eltSize_, scaled(plan_.src(op, 0)) ? 1 : 0);
    }
    st.done = op.bytes;
    st.complete = true;
    --netPending_;
    return true;
  }
  /// Grows a bounce buffer; the transport forgets the old one first (it may hold registrations of it).
  void growBounce(std::vector<std::byte>& buf, uint64_t bytes) {
    if (buf.size() >= bytes) return;
    env_.net->forget(buf.data(), buf.size());
    buf = std::vector<std::byte>(bytes);
  }
  void progressNetQueues() { env_.net->progress(); }
  void pollNet(Clock::time_point until) { env_.net->poll(until); }

  Status failNet(const Round& round) {
    // The provider cancels operations whose connection broke (FI_ECANCELED, which the transport reports
    // as Aborted); unless this communicator was aborted, that is the peer's or the network's failure.
    Code code = netError_.code();
    if (code == Code::Aborted && !(env_.aborted != nullptr && env_.aborted->load(std::memory_order_acquire))) {
      code = Code::RemoteError;
    }
    return fail(Status(code, netError_.message() + " [during " + where(round) + "]"), netPeer_);
  }

  void runLocal(const Op& op) {
    std::byte* dst = resolve(op.dst);
    switch (op.kind) {
      case OpKind::Copy: {
        const std::byte* src = resolve(plan_.src(op, 0));
        if (op.bytes == 0) break;
        if (scaled(plan_.src(op, 0))) {  // in place too: the copy is where the input gets its scalar
          scaleCopy(dst, src, op.bytes);
          break;
        }
        if (src == dst) break;
        // Pieces of a message far larger than the caches go to the caller's buffer with non-temporal
        // stores: the lines would be evicted before anyone reads them, and streaming skips the reads
        // that ordinary stores cause (read-for-ownership).
        const bool stream = (op.dst.kind == BufKind::Recv && streamToRecv_) || (isPeer(op.dst) && streamToPeers_);
        if (stream) cpu::copyStreaming(dst, src, op.bytes);
        else cpu::copy(dst, src, op.bytes);
        break;
      }
      case OpKind::Reduce: {
        srcPtrs_.resize(op.nsrc);
        // PreMulSum: the sources read from this rank's own input get its scalar. The kernel's mask has 64
        // bits; no plan reduces its own input past source 63 (one-shot stages it first, two-shot and the
        // message-passing plans put it first), which the simulator's sweeps would catch as a wrong result.
        uint64_t mask = 0;
        for (uint32_t i = 0; i < op.nsrc; ++i) {
          srcPtrs_[i] = resolve(plan_.src(op, i));
          if (i < 64 && scaled(plan_.src(op, i))) mask |= uint64_t{1} << i;
        }
        combine(dst, srcPtrs_.data(), static_cast<int>(op.nsrc), op.bytes / eltSize_, mask);
        break;
      }
      case OpKind::Finalize:
        if (call_.op == RedOp::Avg) cpu::divideInPlace(call_.dtype, dst, op.bytes / eltSize_, env_.nranks);
        break;
      default:
        break;
    }
  }

  // ---- failure detection ----
  std::string where(const Round& round) const {
    std::string s = std::string(collectiveName(call_.coll)) +
                    (call_.seq != 0 ? " (call #" + std::to_string(call_.seq) : " (batch #" + std::to_string(call_.p2pBatch)) +
                    ", " + plan_.algorithm + ", round " + std::to_string(round_ + 1) + "/" +
                    std::to_string(plan_.rounds.size());
    for (uint32_t i = 0; i < round.numOps; ++i) {
      const Op& op = plan_.ops[round.firstOp + i];
      const OpState& st = states_[i];
      if (st.complete || !isCommOp(op.kind)) continue;  // local operations run after the communication
      if (op.kind == OpKind::Barrier) {
        int late = world_->barrierLaggard(st.generation);
        s += ", waiting at a barrier";
        if (late >= 0) s += " for rank " + std::to_string(env_.globalOfLocal[late]);
      } else if (isRemote(op.peer)) {
        s += std::string(op.kind == OpKind::Send ? ", sending " : ", receiving ") + std::to_string(op.bytes) +
             " bytes " + (op.kind == OpKind::Send ? "to" : "from") + " rank " + std::to_string(op.peer) +
             " on another node";
      } else if (op.kind == OpKind::Send) {
        s += ", sending " + std::to_string(op.bytes) + " bytes to rank " + std::to_string(op.peer) + " (" +
             std::to_string(std::min(st.done, op.bytes)) + " sent)";
      } else {
        s += ", receiving " + std::to_string(op.bytes) + " bytes from rank " + std::to_string(op.peer) + " (" +
             std::to_string(std::min(st.done, op.bytes)) + " received)";
      }
      break;
    }
    return s + ")";
  }

  Status fail(const Status& s, int failedRank) { return reportFailure(env_, s, failedRank); }

  Status checkHealth(const Round& round) {
    if (Status s = interruption(env_, [&] { return where(round); }); !s) return s;
    auto now = Clock::now();
    if (now - lastLiveness_ >= kLivenessInterval) {
      lastLiveness_ = now;
      // Only a dead peer this round still waits for is an error: one that finished and exited is not.
      for (int dead : world_->deadPeers()) {
        int g = env_.globalOfLocal[dead];
        if (waitsFor(round, g)) {
          return fail(Status(Code::RemoteError, "rank " + std::to_string(g) + " exited during " + where(round)), g);
        }
      }
      if (env_.checkArgs) {
        Status s = checkPeerArgs();
        if (!s) return fail(s, -1);
      }
    }
    auto idleMs = std::chrono::duration_cast<std::chrono::milliseconds>(now - lastProgress_).count();
    if (idleMs >= env_.timeoutMs) {
      int stuck = stuckPeer(round);
      return fail(Status(Code::Timeout, "no progress for " + std::to_string(idleMs) + " ms (the communicator's timeout is " +
                                            std::to_string(env_.timeoutMs) + " ms) in " + where(round)),
                  stuck);
    }
    return Status::ok();
  }

  // True when an unfinished operation of `round` needs global rank g (its peer, or a barrier it has not
  // reached yet).
  bool waitsFor(const Round& round, int g) const {
    for (uint32_t i = 0; i < round.numOps; ++i) {
      const Op& op = plan_.ops[round.firstOp + i];
      if (states_[i].complete) continue;
      if (op.peer == g) return true;
      if (op.kind == OpKind::Barrier &&
          world_->barrierLaggard(states_[i].generation) >= 0 &&
          !world_->barrierReachedBy(env_.localIndex[g], states_[i].generation)) {
        return true;
      }
    }
    return false;
  }

  int stuckPeer(const Round& round) const {
    for (uint32_t i = 0; i < round.numOps; ++i) {
      const Op& op = plan_.ops[round.firstOp + i];
      if (states_[i].complete) continue;
      if (op.peer >= 0) return op.peer;
      if (op.kind == OpKind::Barrier) {
        int late = world_->barrierLaggard(states_[i].generation);
        if (late >= 0) return env_.globalOfLocal[late];
      }
    }
    return -1;
  }

  // ---- cross-rank argument checks ----
  shm::CallDescriptor descriptor() const {
    return describeCall(call_.seq, call_.coll, call_.dtype, call_.op, call_.root, call_.count);
  }
  void publishCall() { world_->publishCall(descriptor()); }

  Status checkPeerArgs() {
    for (int l = 0; l < world_->localSize(); ++l) {
      int g = env_.globalOfLocal[l];
      if (g == env_.rank || peerChecked_[g]) continue;
      auto d = world_->peerCall(l, call_.seq);
      if (!d) continue;
      peerChecked_[g] = 1;
      std::string field = mismatch(*d);
      if (!field.empty()) {
        return Status(Code::InvalidUsage, "ranks disagree on call #" + std::to_string(call_.seq) + ": " + field +
                                              " (rank " + std::to_string(env_.rank) + " vs rank " +
                                              std::to_string(g) + ")");
      }
    }
    return Status::ok();
  }

  std::string mismatch(const shm::CallDescriptor& d) const { return callMismatch(descriptor(), d); }

  const Plan& plan_;
  const ExecBuffers& bufs_;
  const ExecCall& call_;
  const ExecEnv& env_;
  shm::ShmWorld* world_;
  const size_t eltSize_;
  const cpu::ReduceFn reduce_;
  const cpu::PremulFn premul_;  // PreMulSum only
  std::vector<OpState>& states_;
  std::vector<uint8_t>& sendBusy_;
  std::vector<uint8_t>& recvBusy_;
  std::vector<uint8_t>& peerChecked_;
  std::vector<const void*>& srcPtrs_;
  ExecWorkspace& work_;
  const bool streamToRecv_;
  const bool streamToPeers_;
  size_t round_ = 0;
  int netPending_ = 0;       // inter-node operations of this round not yet complete
  bool shmPending_ = false;  // shared-memory operations of this round not yet complete (last progressComm)
  bool netFailed_ = false;   // one failed: netError_ names the peer and the operation
  Status netError_;
  int netPeer_ = -1;
  Clock::time_point lastProgress_{};
  Clock::time_point lastLiveness_{};
};

}  // namespace

Status reportFailure(const ExecEnv& env, const Status& s, int failedRank) {
  shm::SharedError e;
  e.code = static_cast<int>(s.code());
  e.failedRank = failedRank;
  e.reporterRank = env.rank;
  e.message = s.message().substr(0, 200);
  env.world->postError(e);
  CFX_WARN(kColl, "%s", s.message().c_str());
  return s;
}

Status execute(const Plan& plan, const ExecBuffers& bufs, const ExecCall& call, const ExecEnv& env,
               ExecWorkspace& work) {
  RankExecutor ex(plan, bufs, call, env, work);
  return ex.run();
}

}  // namespace conflux
