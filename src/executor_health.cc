// The executor's failure detection: dead peers, errors posted by other ranks, the no-progress timeout,
// mismatched arguments, and the text that says where a call stopped (which round, which operation, which
// peer). Nothing here runs while a call progresses normally.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "core/log.h"
#include "src/rank_executor.h"
#include "src/wait.h"

namespace conflux::exec {

std::string RankExecutor::where() const {
  std::string s = std::string(collectiveName(call_.coll)) +
                  (call_.seq != 0 ? " (call #" + std::to_string(call_.seq) : " (batch #" + std::to_string(call_.p2pBatch)) +
                  ", " + plan_.algorithm + ", round " + std::to_string(round_ + 1) + "/" +
                  std::to_string(plan_.rounds.size());
  // The oldest started operation still waiting for a peer.
  anyWaiting([&](uint32_t, const Op& op, const OpState& st) {
    if (op.kind == OpKind::Barrier) {
      int late = local_->barrierLaggard(st.generation);
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
    return true;
  });
  return s + ")";
}

Status RankExecutor::checkHealth() {
  if (Status s = interruption(env_, [&] { return where(); }); !s) return s;
  // A rank on another node failed and said so (its own failure, or one it heard of): this call cannot
  // complete either.
  if (env_.net != nullptr) {
    if (Status s = env_.net->failure(); !s) return fail(Status(s.code(), s.message() + " [during " + where() + "]"), -1);
  }
  auto now = Clock::now();
  if (now - lastLiveness_ >= kLivenessInterval) {
    lastLiveness_ = now;
    // A dead peer a started operation still waits for is an error; so is one that exited before completing this
    // collective call, though this rank waits for another now (a rank on another node, say): the call
    // cannot complete everywhere, and the ranks that wait for it would only learn at their timeout. One
    // that completed the call and exited is not an error.
    for (int dead : local_->deadPeers()) {
      int g = env_.globalOfLocal[dead];
      if (waitsFor(g)) {
        return fail(Status(Code::RemoteError, "rank " + std::to_string(g) + " exited during " + where()), g);
      }
      if (call_.seq != 0 && local_->peerCompleted(dead) < call_.seq) {
        return fail(Status(Code::RemoteError, "rank " + std::to_string(g) + " exited during call #" + std::to_string(call_.seq) +
                                                  " without completing it (this rank, of its node, was in " +
                                                  where() + ")"),
                    g);
      }
    }
    if (env_.checkArgs) {
      Status s = checkPeerArgs();
      if (!s) return fail(s, -1);
    }
  }
  // A message to or from another node that moves part of its bytes is progress, though it has not
  // completed: on a slow link one message may take longer than the timeout.
  if (netPending_ > 0) {
    if (const uint64_t moved = netBytesMoved(); !netMovedKnown_) {
      netMovedSeen_ = moved;
      netMovedKnown_ = true;
    } else if (moved != netMovedSeen_) {
      netMovedSeen_ = moved;
      ownProgress(now);
    }
  }
  // A member of this node this rank waits for that progressed later in this same collective call
  // (itself, or along its own chain of waits) is alive and moving it, and so is this rank; so is a rank
  // on another node it waits for that told it so (tellOtherNodes). Then this rank's progress is published
  // for the members that wait for it, and told to the ranks on other nodes it exchanges messages with.
  // Only real progress enters the chain (a completed operation, moving bytes, a round begun), so ranks
  // that wait for each other in a cycle still time out; progress in another call (a member busy with
  // other work while this call waits for it) is not taken over. A notice is read a little after it was
  // sent, so a time that crossed nodes looks newer by that delay at every notice: it is passed on through at
  // most kMaxProgressHops notices, so a cycle of waits through other nodes still times out, at most that
  // many delays late. A node-mate's published time keeps the count it came with: it is the time itself on
  // the node's one clock, read with no such delay. Point-to-point batches (no call number) neither publish nor take over.
  if (call_.seq != 0) {
    const WaitedProgress w = waitedProgress();
    takeProgress(w.local, w.localHops);
    takeProgress(w.remote, w.remoteHops);
    if (passable_ > publishedProgress_) {
      publishedProgress_ = passable_;
      local_->publishProgress(std::chrono::duration_cast<std::chrono::nanoseconds>(passable_.time_since_epoch()).count(),
                              call_.seq, passableHops_);
    }
    if (env_.net != nullptr) tellOtherNodes(now);
  }
  auto idleMs = std::chrono::duration_cast<std::chrono::milliseconds>(now - lastProgress_).count();
  if (idleMs >= env_.timeoutMs) {
    return reportTimeout(env_, idleMs, where(), stuckPeer());
  }
  return Status::ok();
}

void RankExecutor::tellOtherNodes(Clock::time_point now) {
  // A quarter of the timeout (at least 10 ms, at most 2 s), and only in a call that has lasted that long:
  // calls that progress normally send nothing.
  const auto interval = std::chrono::milliseconds(std::clamp(env_.timeoutMs / 4, 10, 2000));
  if (now - callStart_ < interval || now - lastTold_ < interval) return;
  lastTold_ = now;
  if (!tellPeersKnown_) {
    // The ranks on other nodes this rank exchanges messages with in this plan: those that may be waiting
    // for it (a receiver, or a sender whose message waits for this rank's receive).
    for (const Op& op : plan_.ops) {
      if (op.peer >= 0 && op.peer != env_.rank && op.kind != OpKind::Barrier && isRemote(op.peer) &&
          std::find(tellPeers_.begin(), tellPeers_.end(), op.peer) == tellPeers_.end()) {
        tellPeers_.push_back(op.peer);
      }
    }
    tellPeersKnown_ = true;
  }
  const int64_t ageNs = std::chrono::duration_cast<std::chrono::nanoseconds>(now - passable_).count();
  for (int peer : tellPeers_) env_.net->tellProgress(peer, call_.seq, ageNs, passableHops_);
}

void RankExecutor::takeProgress(Clock::time_point t, uint32_t hops) {
  if (t > lastProgress_) lastProgress_ = t;
  if (hops < transport::MessageTransport::kMaxProgressHops && t > passable_) {
    passable_ = t;
    passableHops_ = hops;
  }
}

bool RankExecutor::waitsFor(int g) const {
  return anyWaiting([&](uint32_t, const Op& op, const OpState& st) {
    if (op.peer == g) return true;
    return op.kind == OpKind::Barrier && local_->barrierLaggard(st.generation) >= 0 &&
           !local_->barrierReachedBy(env_.localIndex[g], st.generation);
  });
}

RankExecutor::WaitedProgress RankExecutor::waitedProgress() const {
  transport::LocalGroup::PeerProgress local;
  transport::MessageTransport::HeardProgress remote;
  auto takeLocal = [&](int l) {
    const auto p = local_->peerProgress(l, call_.seq);
    if (p.hops < transport::MessageTransport::kMaxProgressHops && p.ns > local.ns) local = p;
  };
  anyWaiting([&](uint32_t, const Op& op, const OpState& st) {
    if (op.kind == OpKind::Barrier) {
      for (int l = 0; l < local_->localSize(); ++l) {
        if (l != local_->localRank() && !local_->barrierReachedBy(l, st.generation)) takeLocal(l);
      }
    } else if (op.peer != env_.rank && !isRemote(op.peer)) {
      takeLocal(env_.localIndex[op.peer]);
    } else if (op.peer >= 0 && op.peer != env_.rank && env_.net != nullptr) {
      // Told across nodes (tellOtherNodes); a notice that claims too many hops is not taken.
      const auto heard = env_.net->heardProgress(op.peer, call_.seq);
      if (heard.hops < transport::MessageTransport::kMaxProgressHops && heard.ns > remote.ns) remote = heard;
    }
    return false;
  });
  auto at = [](int64_t ns) { return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns))); };
  return WaitedProgress{at(local.ns), local.hops, at(remote.ns), remote.hops + 1};
}

int RankExecutor::stuckPeer() const {
  int peer = -1;
  anyWaiting([&](uint32_t, const Op& op, const OpState& st) {
    if (op.peer >= 0) peer = op.peer;
    else if (op.kind == OpKind::Barrier) {
      int late = local_->barrierLaggard(st.generation);
      if (late >= 0) peer = env_.globalOfLocal[late];
    }
    return peer >= 0;
  });
  return peer;
}

Status RankExecutor::checkPeerArgs() {
  for (int l = 0; l < local_->localSize(); ++l) {
    int g = env_.globalOfLocal[l];
    if (g == env_.rank || peerChecked_[g]) continue;
    auto d = local_->peerCall(l, call_.seq);
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

}  // namespace conflux::exec

namespace conflux {

Status reportTimeout(const ExecEnv& env, int64_t idleMs, const std::string& where, int waitedFor) {
  std::string text = "no progress for " + std::to_string(idleMs) + " ms (the communicator's timeout is " +
                     std::to_string(env.timeoutMs) + " ms) in " + where;
  int culprit = waitedFor;
  // Ranks wait on each other in chains (a ring, a tree, the ranks of one node behind the one that waits
  // on another node): the rank this one waited for may itself be waiting, and all time out at about the
  // same moment. A stopped or exited process of this node is the end of such a chain, whoever this rank
  // waited for. Otherwise the peer waited for may be waiting too (for a rank of its own node, which it
  // can see): its report, posted here or announced from its node, is given a moment to arrive first.
  const std::vector<int> stopped = env.local->stoppedPeers();
  const std::vector<int> dead = stopped.empty() ? env.local->deadPeers() : std::vector<int>{};
  if (!stopped.empty() || !dead.empty()) {
    culprit = env.globalOfLocal[static_cast<size_t>(stopped.empty() ? dead.front() : stopped.front())];
    text += ": rank " + std::to_string(culprit) + (stopped.empty() ? " has exited" : " is stopped (SIGSTOP or a debugger)");
  } else if (waitedFor >= 0 && waitedFor != env.rank) {
    // A quarter of the timeout, 500 ms at most. (Longer for peers on other nodes was tried: the grace
    // periods of the two nodes then overlap and fewer reports arrive in time, not more.)
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min(500, env.timeoutMs / 4));
    while (std::chrono::steady_clock::now() < until) {
      if (Status s = interruption(env, [&] { return where; }); !s) return s;
      if (env.net != nullptr) {
        env.net->progress();  // notices arrive as the network progresses (this is the thread that drives it)
        if (Status s = env.net->failure(); !s) return reportFailure(env, Status(s.code(), s.message() + " [during " + where + "]"), -1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return reportFailure(env, Status(Code::Timeout, text), culprit);
}

Status reportFailure(const ExecEnv& env, const Status& s, int failedRank) {
  transport::SharedError e;
  e.code = static_cast<int>(s.code());
  e.failedRank = failedRank;
  e.reporterRank = env.rank;
  e.message = s.message().substr(0, 200);
  env.local->postError(e);
  CFX_WARN(kColl, "%s", s.message().c_str());
  return s;
}

}  // namespace conflux
