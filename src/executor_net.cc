// The executor's messages to and from ranks on other nodes: posting an operation to the message transport
// (transport/transport.h) with its tag and bounce memory, completing it, and the error of one that failed.
#include <string>

#include "src/rank_executor.h"

namespace conflux::exec {
namespace {

// Bounce regions start at multiples of this.
constexpr uint64_t kBounceAlign = 64;
// Bounce memory kept for rounds ahead of the oldest one (beyond the largest round's block, which lets
// the rounds run one by one whatever their size), at most (window - 1) largest blocks: small rounds
// (pipelined segments) run ahead within it.
constexpr uint64_t kBounceAheadBytes = uint64_t{16} << 20;

constexpr uint64_t alignBounce(uint64_t b) { return (b + kBounceAlign - 1) / kBounceAlign * kBounceAlign; }

}  // namespace

void RankExecutor::planBounce() {
  const size_t nrounds = plan_.rounds.size();
  work_.netReqs.assign(plan_.ops.size(), transport::Request{});
  work_.bounceOffset.assign(plan_.ops.size(), 0);
  work_.roundBounce.assign(nrounds, 0);
  work_.roundBlock.assign(nrounds, -1);
  work_.roundBounced.assign(nrounds, 0);
  work_.blocks.clear();
  work_.blocksHead = 0;
  uint64_t largest = 0, total = 0;
  for (size_t r = 0; r < nrounds; ++r) {
    const Round& round = plan_.rounds[r];
    uint64_t& bytes = work_.roundBounce[r];
    for (uint32_t i = round.firstOp; i < round.firstOp + round.numOps; ++i) {
      const Op& op = plan_.ops[i];
      if (!usesBounce(op) || !isRemote(op.peer)) continue;
      work_.bounceOffset[i] = bytes;
      bytes += alignBounce(op.bytes);
      ++work_.roundBounced[r];
    }
    largest = std::max(largest, bytes);
    total += bytes;
  }
  // Round by round, one block is in use at a time. Nothing is in flight between calls, so nothing is
  // posted into the old buffer when it grows.
  const uint64_t ahead = std::min(kBounceAheadBytes, largest * (windowRounds_ - 1));
  growBounce(work_.bounce, std::min(total, largest + ahead));
  nextBlock_ = 0;
}

void RankExecutor::reserveBounce() {
  auto& blocks = work_.blocks;
  // Release the blocks of rounds whose bounced operations all completed, oldest first.
  while (work_.blocksHead < blocks.size() && work_.roundBounced[blocks[work_.blocksHead].round] == 0) ++work_.blocksHead;
  if (work_.blocksHead == blocks.size()) {
    blocks.clear();
    work_.blocksHead = 0;
  }
  const uint64_t capacity = work_.bounce.size();
  const size_t endRound = std::min(plan_.rounds.size(), round_ + windowRounds_);
  for (; nextBlock_ < endRound; ++nextBlock_) {
    const uint64_t bytes = work_.roundBounce[nextBlock_];
    if (bytes == 0) continue;
    // The blocks in use form one run of the ring from the oldest's start to the newest's end; a new one
    // goes after the newest, or wraps to the start of the memory, before the oldest.
    uint64_t at = 0;
    if (work_.blocksHead < blocks.size()) {
      const auto& oldest = blocks[work_.blocksHead];
      const auto& newest = blocks.back();
      if (newest.start >= oldest.start) {  // not wrapped: free after the newest and before the oldest
        if (capacity - newest.end >= bytes) at = newest.end;
        else if (oldest.start >= bytes) at = 0;
        else return;
      } else {  // wrapped: free between the newest and the oldest
        if (oldest.start - newest.end >= bytes) at = newest.end;
        else return;
      }
    }
    blocks.push_back({nextBlock_, at, at + bytes});
    work_.roundBlock[nextBlock_] = static_cast<int64_t>(at);
  }
}

Status RankExecutor::postNet(uint32_t i, const Op& op) {
  const bool send = op.kind == OpKind::Send;
  uint64_t tag = 0;
  if (call_.seq == 0) {
    tag = transport::p2pTag(send ? work_.p2pSent[op.peer]++ : work_.p2pRecvd[op.peer]++);
  } else {
    tag = transport::collectiveTag(send ? work_.netSent[op.peer]++ : work_.netRecvd[op.peer]++, static_cast<uint32_t>(call_.seq));
  }
  const int64_t block = work_.roundBlock[graph_.roundOf[i]];
  transport::Request& req = work_.netReqs[i];
  if (send && scaled(plan_.src(op, 0))) {
    std::byte* out = work_.bounce.data() + block + work_.bounceOffset[i];
    scaleCopy(out, resolve(plan_.src(op, 0)), op.bytes);
    req = env_.net->isend(op.peer, tag, out, op.bytes);
  } else if (send) {
    req = env_.net->isend(op.peer, tag, resolve(plan_.src(op, 0)), op.bytes);
  } else if (op.kind == OpKind::Recv) {
    req = env_.net->irecv(op.peer, tag, resolve(op.dst), op.bytes);
  } else {
    req = env_.net->irecv(op.peer, tag, work_.bounce.data() + block + work_.bounceOffset[i], op.bytes);
  }
  ++netPending_;
  // The connections' counts run on: the next health check takes what they say then as its starting
  // point (read there, on the slow path, not here on every message).
  netMovedKnown_ = false;
  return Status::ok();
}

bool RankExecutor::progressNet(uint32_t i, const Op& op, OpState& st) {
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
  const uint32_t round = graph_.roundOf[i];
  if (op.kind == OpKind::RecvReduce && op.bytes > 0) {
    const void* srcs[2] = {resolve(plan_.src(op, 0)), work_.bounce.data() + work_.roundBlock[round] + work_.bounceOffset[i]};
    combine(resolve(op.dst), srcs, 2, op.bytes / eltSize_, scaled(plan_.src(op, 0)) ? 1 : 0);
  }
  if (usesBounce(op)) --work_.roundBounced[round];
  req = transport::Request{};
  st.done = op.bytes;
  completed(op, st);
  --netPending_;
  return true;
}

void RankExecutor::countTraffic(const Op& op) {
  if (op.peer == env_.rank) return;  // a copy to itself moves nothing between ranks
  TrafficCounters& t = *env_.traffic;
  const int c = isRemote(op.peer) ? TrafficCounters::kRemote : TrafficCounters::kLocal;
  const bool send = op.kind == OpKind::Send;
  TrafficCounters::add((send ? t.sentBytes : t.receivedBytes)[c], op.bytes);
  TrafficCounters::add((send ? t.sentMessages : t.receivedMessages)[c], 1);
}

uint64_t RankExecutor::netBytesMoved() const {
  uint64_t moved = 0;
  // The messages in flight, and below them the bytes still moving on the connections with the peers
  // waited for (a send that completed into the kernel's buffer, on its way to the peer that must answer).
  anyWaiting([&](uint32_t i, const Op& op, const OpState&) {
    if (op.kind != OpKind::Barrier && isRemote(op.peer)) moved += work_.netReqs[i].movedBytes() + env_.net->linkActivity(op.peer);
    return false;
  });
  return moved;
}

void RankExecutor::growBounce(std::vector<std::byte>& buf, uint64_t bytes) {
  if (buf.size() >= bytes) return;
  env_.net->forget(buf.data(), buf.size());
  buf = std::vector<std::byte>(bytes);
}

Status RankExecutor::failNet() {
  // An error a rank of this node already posted comes first: a broken connection is often the far
  // side's reaction to it (its ranks failed and closed on hearing of it), not the cause.
  if (Status s = interruption(env_, [&] { return where(); }); !s) return s;
  // The provider cancels operations whose connection broke (FI_ECANCELED, which the transport reports
  // as Aborted); unless this communicator was aborted, that is the peer's or the network's failure.
  Code code = netError_.code();
  if (code == Code::Aborted && !(env_.aborted != nullptr && env_.aborted->load(std::memory_order_acquire))) {
    code = Code::RemoteError;
  }
  return fail(Status(code, netError_.message() + " [during " + where() + "]"), netPeer_);
}

}  // namespace conflux::exec
