// The executor's dataflow loop: the window of open rounds, starting operations whose dependencies completed,
// streamed sends and receives with the local group's members, the local operations, and the entry point
// (executor.h has the semantics; rank_executor.h the class, split over three files).
#include "src/executor.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "core/config.h"
#include "core/copy_bytes.h"
#include "core/error.h"
#include "core/ticks.h"
#include "src/rank_executor.h"
#include "transport/shm/cross_memory.h"

namespace conflux::exec {
namespace {

// Every message occupies a multiple of 8 bytes of its channel, so each message starts 8-byte aligned and
// no element (at most 8 bytes) ever straddles the ring's end. Both sides know the sizes from the plan.
constexpr uint64_t kWireAlign = 8;
constexpr uint64_t wireBytes(uint64_t b) { return (b + kWireAlign - 1) & ~(kWireAlign - 1); }
constexpr std::byte kZeros[kWireAlign] = {};

// With messages to or from other nodes in flight nobody rings the doorbell for their completions: a
// waiting rank blocks on the transport's completion queues instead, this long at a time, so that local-
// group members and the health checks are still looked at often.
constexpr Clock::duration kNetWait = std::chrono::milliseconds(1);
// While operations with local-group members are also unfinished: a member's write rings the group's
// doorbell, which a rank blocked on the network's wait objects cannot hear, so it looks again this soon
// (hierarchical plans mix both kinds in every round).
constexpr Clock::duration kMixedNetWait = std::chrono::microseconds(50);

}  // namespace

Status RankExecutor::run() {
  // Point-to-point batches are made by some ranks only: nothing to compare them with.
  const bool checked = local_ != nullptr && env_.checkArgs && call_.seq != 0;
  if (checked) publishCall();
  states_.assign(plan_.ops.size(), OpState{});
  if (env_.net != nullptr) planBounce();
  slideWindow();
  Backoff backoff(env_);
  bool progressedSinceCheck = false;
  callStart_ = Clock::now();
  lastProgress_ = passable_ = callStart_;
  passableHops_ = 0;
  for (;;) {
    bool allDone = true;
    bool progressed = progress(allDone);
    if (netFailed_) return failNet();
    if (allDone) break;
    if (progressed) {
      backoff.progressed();
      progressedSinceCheck = true;
      continue;
    }
    if (backoff.pause()) continue;
    // Reading the clock only here keeps it off the fast path.
    if (progressedSinceCheck) {
      ownProgress(Clock::now());
      progressedSinceCheck = false;
    }
    // Read the doorbell before the last check so that a ring in between is not lost.
    uint32_t seen = local_->doorbell();
    allDone = true;
    if (progress(allDone)) {
      backoff.respin();
      progressedSinceCheck = true;
      continue;
    }
    if (netFailed_) return failNet();
    if (allDone) break;
    Status s = checkHealth();
    if (!s) return s;
    call_.trace.noteWait(static_cast<int>(round_), stuckPeer());
    const uint64_t blockedAt = env_.traffic != nullptr ? ticksNow() : 0;
    if (netPending_ > 0) {
      // Network completions ring no doorbell: block on the transport instead, briefly, so that
      // local-group members waited for are not left waiting long.
      pollNet(Clock::now() + (localPending_ ? kMixedNetWait : kNetWait));
    } else {
      local_->sleep(seen, kMaxSleepMs);
    }
    if (env_.traffic != nullptr) {
      TrafficCounters::add(env_.traffic->waitTicks[netPending_ > 0 ? TrafficCounters::kRemote : TrafficCounters::kLocal],
                           ticksNow() - blockedAt);
    }
    backoff.woke();
  }
  if (checked) {
    Status s = checkPeerArgs();
    if (!s) return fail(s, -1);
  }
  // Node-mates that see this rank exit can tell whether it died in a call (checkHealth).
  if (local_ != nullptr && call_.seq != 0) local_->publishCompleted(call_.seq);
  return Status::ok();
}

void RankExecutor::slideWindow() {
  const auto n = static_cast<uint32_t>(graph_.order.size());
  while (lo_ < n && states_[graph_.order[lo_]].complete) ++lo_;
  if (lo_ == n) {
    hi_ = n;
    return;
  }
  round_ = graph_.roundOf[graph_.order[lo_]];
  // Program order keeps rounds contiguous: the window ends with the last open round's operations.
  hi_ = graph_.roundEnd[std::min(plan_.rounds.size(), round_ + windowRounds_) - 1];
  if (env_.net != nullptr) reserveBounce();
}

bool RankExecutor::ready(uint32_t i, uint32_t pos) const {
  const Op& op = plan_.ops[i];
  if (op.kind == OpKind::Barrier) return pos == lo_;  // a fence: every earlier operation completed
  for (uint32_t k = graph_.depStart[i]; k < graph_.depStart[i + 1]; ++k) {
    if (!states_[graph_.deps[k]].complete) return false;
  }
  const uint32_t prev = graph_.channelPrev[i];
  if (prev == OpGraph::kNone) return true;
  // Messages to another node are matched by tags given in plan order: the previous one must be posted.
  // A stream carries one message after the other: the previous one must be complete.
  return isRemote(op.peer) ? states_[prev].started : states_[prev].complete;
}

bool RankExecutor::start(uint32_t i, const Op& op, OpState& st) {
  if (!isCommOp(op.kind)) {
    runLocal(op);
    if (netFailed_) return false;  // a single-copy read failed
    st.started = true;
    completed(op, st);
    return true;
  }
  if (op.kind == OpKind::Barrier) {
    if (env_.net != nullptr) {
      netError_ = Status(Code::InternalError, "plan " + plan_.algorithm +
                                                  " has a barrier, but ranks span nodes (barriers join one node's local group only)");
      netFailed_ = true;
      return false;
    }
    st.generation = local_->barrierArrive();
  } else if (isRemote(op.peer)) {
    if (work_.roundBlock[graph_.roundOf[i]] < 0 && work_.roundBounce[graph_.roundOf[i]] > 0) return false;
    if (Status s = postNet(i, op); !s) {
      netError_ = s;
      netPeer_ = op.peer;
      netFailed_ = true;
      return false;
    }
  }
  st.started = true;
  return true;
}

void RankExecutor::completed(const Op& op, OpState& st) {
  st.complete = true;
  if (env_.traffic != nullptr && isCommOp(op.kind) && op.kind != OpKind::Barrier) countTraffic(op);
}

bool RankExecutor::progress(bool& allDone) {
  bool progressed = false;
  localPending_ = false;
  if (netPending_ > 0) progressNetQueues();
  for (uint32_t pos = lo_; pos < hi_; ++pos) {
    const uint32_t i = graph_.order[pos];
    const Op& op = plan_.ops[i];
    OpState& st = states_[i];
    if (st.complete) continue;
    if (!st.started) {
      if (!ready(i, pos) || !start(i, op, st)) {
        if (netFailed_) return progressed;
        allDone = false;
        continue;
      }
      progressed = true;
      if (st.complete) continue;
    }
    if (op.kind == OpKind::Barrier) {
      if (local_->barrierReached(st.generation)) {
        if (st.waited) local_->noteBarrierSeen(st.generation);  // how far apart the cores are now
        completed(op, st);
        progressed = true;
      } else {
        st.waited = true;
        localPending_ = true;
      }
    } else if (isRemote(op.peer)) {
      progressed |= progressNet(i, op, st);
    } else {
      progressed |= op.kind == OpKind::Send ? progressSend(op, st) : progressRecv(op, st);
      if (st.complete) completed(op, st);
      else localPending_ = true;
    }
    if (!st.complete) allDone = false;
  }
  // The window moves on as its oldest operations complete; what it opens starts on the next pass.
  if (progressed) slideWindow();
  if (lo_ < graph_.order.size()) allDone = false;
  return progressed;
}

bool RankExecutor::progressSend(const Op& op, OpState& st) {
  transport::SendChannel& ch = *env_.links[op.peer].out;
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

bool RankExecutor::progressRecv(const Op& op, OpState& st) {
  transport::RecvChannel& ch = *env_.links[op.peer].in;
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
        copyBytes(dst + st.done, in.data(), take);
      }
    }
    ch.consume(take);
    st.done += take;
    progressed = true;
  }
  st.complete = st.done == total;
  return progressed;
}

void RankExecutor::copyFromPeerProcess(int pid, const BufRef& ref, std::byte* dst, const std::byte* remote,
                                       uint64_t bytes) {
  const int err = shm::readPeerMemory(pid, reinterpret_cast<uint64_t>(remote), dst, bytes);
  if (err == 0) return;
  // A peer that died fails the read with ESRCH, or, once its pid is reused, EPERM or EFAULT: its pidfd
  // (liveness) tells which.
  bool gone = err == ESRCH;
  for (int l : local_->deadPeers()) gone = gone || l == env_.localIndex[ref.rank];
  netError_ = gone ? Status(Code::RemoteError, "rank " + std::to_string(ref.rank) + " exited while its send buffer was read")
                   : Status(Code::SystemError, "cannot read rank " + std::to_string(ref.rank) +
                                                   "'s send buffer (process_vm_readv: " + std::strerror(err) + ")");
  netPeer_ = ref.rank;
  netFailed_ = true;
}

void RankExecutor::runLocal(const Op& op) {
  std::byte* dst = resolve(op.dst);
  switch (op.kind) {
    case OpKind::Copy: {
      const std::byte* src = resolve(plan_.src(op, 0));
      if (op.bytes == 0) break;
      if (const int pid = peerProcessOf(plan_.src(op, 0)); pid != 0) {
        copyFromPeerProcess(pid, plan_.src(op, 0), dst, src, op.bytes);
        break;
      }
      if (scaled(plan_.src(op, 0))) {  // in place too: the copy is where the input gets its scalar
        scaleCopy(dst, src, op.bytes);
        break;
      }
      copyOut(op.dst, dst, src, op.bytes);
      break;
    }
    case OpKind::Reduce:
    case OpKind::ReduceSpread: {
      if (bufs_.peerProcess != nullptr) {  // single-copy calls are copies only (src/direct_call.h)
        netError_ = Status(Code::InternalError, "plan " + plan_.algorithm + " reduces in a call that reads peers' private buffers");
        netFailed_ = true;
        break;
      }
      srcPtrs_.resize(op.nsrc);
      // PreMulSum: the sources read from this rank's own input get its scalar. The kernel's mask has 64
      // bits; no plan reduces its own input past source 63 (one-shot all-reduce stages it first; one-shot
      // reduce-scatter, direct, two-shot and the message-passing plans put it first), which the
      // simulator's plan checks enforce.
      uint64_t mask = 0;
      for (uint32_t i = 0; i < op.nsrc; ++i) {
        srcPtrs_[i] = resolve(plan_.src(op, i));
        if (i < 64 && scaled(plan_.src(op, i))) mask |= uint64_t{1} << i;
      }
      const size_t count = op.bytes / eltSize_;
      if (op.kind == OpKind::Reduce) {
        combine(dst, srcPtrs_.data(), static_cast<int>(op.nsrc), count, mask);
        break;
      }
      // ReduceSpread. When dst is a receive buffer (the direct plans, whose extras are peers' receive
      // buffers; two-shot's dst is its staging) and the call streams
      // to this rank's own recv and to peers' (out of place, and large or cold: see streamToRecv_),
      // every destination is cold: one pass over the sources streams the result to all of them. (A warm
      // repeated 4 MiB call, 2 ranks -R 1, ran at 13.5 GB/s with its own copy streamed, 17.2 without.)
      // Otherwise (a destination in staging, which a peer reads next, from cache: plain stores even with
      // CONFLUX_SHM_STREAM_STAGING, which streams only copies; in place a destination
      // may be a source; avg divides; PreMulSum scales): reduce into dst, finish it there, copy it out
      // while it is in cache.
      const uint32_t ndst = 1 + op.nextra;
      if (streamToRecv_ && streamToPeers_ && op.dst.kind == BufKind::Recv && mask == 0 && call_.op != RedOp::Avg &&
          ndst <= cpu::kMaxFanout) {
        void* dsts[cpu::kMaxFanout];
        dsts[0] = dst;
        for (uint32_t k = 0; k < op.nextra; ++k) dsts[1 + k] = resolve(plan_.extraDst(op, k));
        cpu::reduceStreamingTo(call_.dtype, call_.op, dsts, static_cast<int>(ndst), srcPtrs_.data(),
                               static_cast<int>(op.nsrc), count);
        work_.streamedBytes += uint64_t{ndst} * op.bytes;
        break;
      }
      combine(dst, srcPtrs_.data(), static_cast<int>(op.nsrc), count, mask);
      if (call_.op == RedOp::Avg) cpu::divideInPlace(call_.dtype, dst, count, env_.nranks);
      for (uint32_t k = 0; k < op.nextra; ++k) {
        const BufRef& ref = plan_.extraDst(op, k);
        std::byte* out = resolve(ref);
        // A destination that is one of the sources (in place) was just read: its lines are in cache,
        // where plain stores are cheaper than streaming ones.
        const bool cached = std::find(srcPtrs_.begin(), srcPtrs_.end(), out) != srcPtrs_.end();
        if (cached) cpu::copy(out, dst, op.bytes);
        else copyOut(ref, out, dst, op.bytes);
      }
      break;
    }
    case OpKind::Finalize:
      if (call_.op == RedOp::Avg) cpu::divideInPlace(call_.dtype, dst, op.bytes / eltSize_, env_.nranks);
      break;
    default:
      break;
  }
}

}  // namespace conflux::exec

namespace conflux {

ExecEnv::StreamStaging streamStagingFromConfig() {
  const std::string given = config::getString(config::Var::SHM_STREAM_STAGING);
  std::string v = given;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (v == "auto") return ExecEnv::StreamStaging::WhenFar;
  if (v == "1" || v == "true" || v == "yes" || v == "on") return ExecEnv::StreamStaging::Always;
  if (v == "0" || v == "false" || v == "no" || v == "off") return ExecEnv::StreamStaging::Never;
  throw Error(Code::InvalidArgument, "CONFLUX_SHM_STREAM_STAGING='" + given +
                                         "': must be auto, 1 (or true, yes, on) or 0 (or false, no, off)");
}

Status execute(const Plan& plan, const ExecBuffers& bufs, const ExecCall& call, const ExecEnv& env,
               ExecWorkspace& work) {
  const OpGraph* graph = call.graph;
  if (graph == nullptr) {
    if (bufs.send == nullptr && bufs.recv == nullptr) {
      work.graph = buildOpGraph(plan, env.rank, 0);  // point-to-point batches: offsets are addresses, one space
    } else {
      work.graph = buildOpGraph(plan, env.rank, std::nullopt);
      // In place, the send buffer's bytes are the receive buffer's: built again with them aliased.
      if (auto at = sendInRecvOf(work.graph, bufs.send, bufs.recv)) work.graph = buildOpGraph(plan, env.rank, at);
    }
    graph = &work.graph;
  }
  exec::RankExecutor ex(plan, *graph, bufs, call, env, work);
  return ex.run();
}

}  // namespace conflux
