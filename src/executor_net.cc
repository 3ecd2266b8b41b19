// The executor's messages to and from ranks on other nodes: posting a round's operations to the message
// transport (transport/transport.h) with their tags and bounce buffers, and the error of one that failed.
#include <string>

#include "src/rank_executor.h"

namespace conflux::exec {
namespace {

// Bounce-buffer regions of one round start at multiples of this.
constexpr uint64_t kBounceAlign = 64;

}  // namespace

Status RankExecutor::postNet(const Round& round) {
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
                                             " has a barrier, but ranks span nodes (barriers join one node's local group only)");
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
  // The connections' counts run on across rounds: the first health check of the round takes what they
  // say then as its starting point (read there, on the slow path, not here on every round).
  netMovedKnown_ = false;
  return Status::ok();
}

uint64_t RankExecutor::netBytesMoved(const Round& round) const {
  uint64_t moved = 0;
  for (const transport::Request& r : work_.netReqs) moved += r.movedBytes();
  // Below the requests: bytes still moving on the connections with the peers this round waits for
  // (a send that completed into the kernel's buffer, on its way to the peer that must answer).
  for (uint32_t i = 0; i < round.numOps; ++i) {
    const Op& op = plan_.ops[round.firstOp + i];
    if (!states_[i].complete && isCommOp(op.kind) && op.kind != OpKind::Barrier && isRemote(op.peer)) {
      moved += env_.net->linkActivity(op.peer);
    }
  }
  return moved;
}

void RankExecutor::growBounce(std::vector<std::byte>& buf, uint64_t bytes) {
  if (buf.size() >= bytes) return;
  env_.net->forget(buf.data(), buf.size());
  buf = std::vector<std::byte>(bytes);
}

Status RankExecutor::failNet(const Round& round) {
  // An error a rank of this node already posted comes first: a broken connection is often the far
  // side's reaction to it (its ranks failed and closed on hearing of it), not the cause.
  if (Status s = interruption(env_, [&] { return where(round); }); !s) return s;
  // The provider cancels operations whose connection broke (FI_ECANCELED, which the transport reports
  // as Aborted); unless this communicator was aborted, that is the peer's or the network's failure.
  Code code = netError_.code();
  if (code == Code::Aborted && !(env_.aborted != nullptr && env_.aborted->load(std::memory_order_acquire))) {
    code = Code::RemoteError;
  }
  return fail(Status(code, netError_.message() + " [during " + where(round) + "]"), netPeer_);
}

}  // namespace conflux::exec
