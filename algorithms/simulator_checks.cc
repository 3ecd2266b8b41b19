// The simulator's static plan checks (well-formed ops, bounds, sharing, intra-round conflicts) and
// its final data check.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "algorithms/simulator_internal.h"

namespace conflux::simdetail {
namespace {

bool writesDst(OpKind k) { return k != OpKind::Send && k != OpKind::Barrier; }

uint32_t expectedSources(OpKind k, uint32_t actual) {
  switch (k) {
    case OpKind::Send:
    case OpKind::RecvReduce:
    case OpKind::Copy: return 1;
    case OpKind::Reduce:
    case OpKind::ReduceSpread: return std::max<uint32_t>(1, actual);
    default: return 0;
  }
}

/// A byte range of one (symbolic) memory region touched by one op of a round.
struct Access {
  int region;
  uint64_t lo, hi;
  bool write;
  uint32_t op;
  BufRef ref;
};

}  // namespace

void Simulator::checkRef(int r, uint32_t round, uint32_t opIdx, const BufRef& ref, uint64_t bytes, bool write) {
  auto fail = [&](const std::string& why) {
    throw SimFailure{"bad reference: " + where(r, -1, round, opIdx) + ": " + refName(r, ref, bytes) + " " + why};
  };
  uint64_t size = 0;
  switch (ref.kind) {
    case BufKind::Send:
      if (write) fail("is written, but the send buffer is read-only");
      size = sizes_.send;
      break;
    case BufKind::Recv: size = sizes_.recv; break;
    case BufKind::Scratch: size = plans_[r].scratchBytes; break;
    case BufKind::Staging: {
      const int owner = ref.rank < 0 ? r : ref.rank;
      if (owner >= n_) fail("names a staging owner outside the communicator");
      if (owner >= static_cast<int>(plans_.size())) return;  // checked when the owner's plan exists
      size = plans_[owner].stagingBytes;
      break;
    }
    default: fail("has an invalid buffer kind");
  }
  if (ref.kind == BufKind::Scratch && ref.rank >= 0 && ref.rank != r) {
    fail("refers to rank " + std::to_string(ref.rank) + "'s scratch, which is private");
  }
  if ((ref.kind == BufKind::Send || ref.kind == BufKind::Recv) && ref.rank >= n_) {
    fail("names an owner outside the communicator");
  }
  if (ref.offset % elt_ != 0) fail("is not aligned to the element size " + std::to_string(elt_));
  if (ref.offset > size || bytes > size - ref.offset) fail("is out of bounds (size " + std::to_string(size) + ")");
}

void Simulator::validate(int r) {
  const Plan& plan = plans_[r];
  auto fail = [&](uint32_t round, uint32_t i, const std::string& why) {
    throw SimFailure{"malformed plan: " + where(r, -1, round, i) + ": " + why};
  };
  uint32_t next = 0;
  bool hasBarrier = false;
  bool peerAccessPending = false;  // a peer's buffer was touched and no Barrier round followed yet
  auto isPeer = [r](const BufRef& ref) {
    return (ref.kind == BufKind::Send || ref.kind == BufKind::Recv) && ref.rank >= 0 && ref.rank != r;
  };
  for (uint32_t rd = 0; rd < plan.rounds.size(); ++rd) {
    const Round& round = plan.rounds[rd];
    if (round.firstOp != next || round.numOps > plan.ops.size() - next) {
      throw SimFailure{"malformed plan: rank " + std::to_string(r) + " round " + std::to_string(rd) +
                       " does not continue the previous round's ops"};
    }
    next += round.numOps;
    bool roundBarrier = false;
    for (uint32_t i = round.firstOp; i < next; ++i) roundBarrier |= plan.ops[i].kind == OpKind::Barrier;
    hasBarrier |= roundBarrier;
    if (roundBarrier) peerAccessPending = false;
    for (uint32_t i = round.firstOp; i < next; ++i) {
      const Op& op = plan.ops[i];
      if (op.kind == OpKind::Barrier) continue;
      bool peer = writesDst(op.kind) && isPeer(op.dst);
      for (uint32_t s = 0; s < op.nsrc + op.nextra && op.firstSrc + s < plan.sources.size(); ++s) {
        peer |= isPeer(plan.sources[op.firstSrc + s]);
      }
      if (peer && isCommOp(op.kind)) fail(rd, i, "a message names a peer's buffer (only local operations may)");
      peerAccessPending |= peer;
    }
    for (uint32_t i = round.firstOp; i < next; ++i) {
      const Op& op = plan.ops[i];
      if (op.kind > OpKind::ReduceSpread) fail(rd, i, "unknown op kind");
      if (op.nsrc != expectedSources(op.kind, op.nsrc)) fail(rd, i, "wrong number of sources");
      if (op.nextra != 0 && op.kind != OpKind::ReduceSpread) fail(rd, i, "extra destinations on an op that has none");
      if (op.firstSrc > plan.sources.size() || op.nsrc + uint64_t{op.nextra} > plan.sources.size() - op.firstSrc) {
        fail(rd, i, "sources out of range");
      }
      if (op.kind == OpKind::Barrier) continue;
      if (isCommOp(op.kind) && roundBarrier) {
        fail(rd, i, "a message in a round with a Barrier (a Barrier is its round's only communication: the executor runs it as a fence)");
      }
      if (op.bytes % elt_ != 0) fail(rd, i, std::to_string(op.bytes) + " bytes is not a whole number of elements");
      if (isCommOp(op.kind)) {
        if (op.peer < 0 || op.peer >= n_ || op.peer == r) fail(rd, i, "invalid peer " + std::to_string(op.peer));
        if (op.bytes == 0) fail(rd, i, "zero-byte message (must be skipped on both sides)");
      }
      for (uint32_t s = 0; s < op.nsrc; ++s) {
        const BufRef& src = plan.src(op, s);
        checkRef(r, rd, i, src, op.bytes, false);
        // The executor's PreMulSum kernels take a 64-bit mask of the sources to scale (src/executor.cc).
        if (s >= 64 && ownInput(r, src) && (op.kind == OpKind::Reduce || op.kind == OpKind::ReduceSpread)) {
          fail(rd, i, "reduces this rank's own input as source " + std::to_string(s) +
                          " (the executor scales a PreMulSum input only among the first 64 sources)");
        }
      }
      for (uint32_t k = 0; k < op.nextra; ++k) checkRef(r, rd, i, plan.extraDst(op, k), op.bytes, true);
      if (writesDst(op.kind)) {
        checkRef(r, rd, i, op.dst, op.bytes, true);
      }
    }
    checkRoundConflicts(r, rd);
  }
  if (peerAccessPending) {
    throw SimFailure{"rank " + std::to_string(r) + "'s plan touches a peer's buffer after its last Barrier "
                     "(the peer may return and reuse the buffer)"};
  }
  if (next != plan.ops.size()) {
    throw SimFailure{"malformed plan: rank " + std::to_string(r) + " has ops outside every round"};
  }
  if (plan.stagingBytes > p_.stagingBytes) {
    throw SimFailure{"rank " + std::to_string(r) + "'s plan uses " + std::to_string(plan.stagingBytes) +
                     " staging bytes, more than the " + std::to_string(p_.stagingBytes) + " available"};
  }
  if (plan.stagingBytes > 0 && !hasBarrier) {
    throw SimFailure{"rank " + std::to_string(r) + "'s plan uses staging but has no Barrier"};
  }
}

void Simulator::checkRoundConflicts(int r, uint32_t round) {
  const Plan& plan = plans_[r];
  const Round& rd = plan.rounds[round];
  auto region = [&](const BufRef& ref) -> Phys {
    switch (ref.kind) {
      case BufKind::Send: {
        const int owner = ref.rank < 0 ? r : ref.rank;
        return {4 + n_ + 2 * owner + (cfg_.inPlace ? 1 : 0), sendBase_[owner] + ref.offset};
      }
      case BufKind::Recv: {
        const int owner = ref.rank < 0 ? r : ref.rank;
        return {4 + n_ + 2 * owner + 1, recvBase_[owner] + ref.offset};
      }
      case BufKind::Scratch: return {2, ref.offset};
      case BufKind::Staging: return {3 + (ref.rank < 0 ? r : ref.rank), ref.offset};
    }
    return {};
  };
  // A local operation may read exactly what a Recv of its round received (rule 3's exception): the
  // round's messages complete before its local operations run.
  std::vector<std::pair<Phys, uint64_t>> received;
  for (uint32_t i = rd.firstOp; i < rd.firstOp + rd.numOps; ++i) {
    if (plan.ops[i].kind == OpKind::Recv) received.push_back({region(plan.ops[i].dst), plan.ops[i].bytes});
  }
  std::vector<Access> acc;
  auto add = [&](const BufRef& ref, uint64_t bytes, bool write, uint32_t i) {
    const Phys ph = region(ref);
    if (bytes > 0) acc.push_back({ph.region, ph.off, ph.off + bytes, write, i, ref});
  };
  for (uint32_t i = rd.firstOp; i < rd.firstOp + rd.numOps; ++i) {
    const Op& op = plan.ops[i];
    if (op.kind == OpKind::Barrier) continue;
    const bool hasDst = writesDst(op.kind);
    const Phys dst = hasDst ? region(op.dst) : Phys{};
    if (op.kind == OpKind::Copy && region(plan.src(op, 0)) == dst) continue;  // a no-op in place
    if (hasDst) add(op.dst, op.bytes, true, i);
    std::vector<Phys> extras;
    for (uint32_t k = 0; k < op.nextra; ++k) {
      add(plan.extraDst(op, k), op.bytes, true, i);
      extras.push_back(region(plan.extraDst(op, k)));
    }
    for (uint32_t s = 0; s < op.nsrc; ++s) {
      const BufRef& src = plan.src(op, s);
      // dst (and a ReduceSpread's extra destinations) may equal a source exactly
      if (hasDst && region(src) == dst) continue;
      if (std::find(extras.begin(), extras.end(), region(src)) != extras.end()) continue;
      if (!isCommOp(op.kind) &&
          std::find(received.begin(), received.end(), std::make_pair(region(src), op.bytes)) != received.end()) {
        continue;
      }
      add(src, op.bytes, false, i);
    }
  }
  std::sort(acc.begin(), acc.end(), [](const Access& a, const Access& b) {
    return a.region != b.region ? a.region < b.region : a.lo < b.lo;
  });
  const Access* maxAny = nullptr;
  const Access* maxWrite = nullptr;
  for (size_t k = 0; k < acc.size(); ++k) {
    const Access& a = acc[k];
    if (k > 0 && acc[k - 1].region != a.region) maxAny = maxWrite = nullptr;
    const Access* hit = nullptr;
    if (maxWrite && maxWrite->hi > a.lo) hit = maxWrite;
    else if (a.write && maxAny && maxAny->hi > a.lo) hit = maxAny;
    if (hit) {
      throw SimFailure{"conflict within a round: " + where(r, -1, round, a.op) + (a.write ? " writes " : " reads ") +
                       refName(r, a.ref, a.hi - a.lo) + " while op " + std::to_string(hit->op) + " (" +
                       std::string(opKindName(plan.ops[hit->op].kind)) + ")" +
                       (hit->write ? " writes " : " reads ") + refName(r, hit->ref, hit->hi - hit->lo) +
                       " (overlapping memory" + (cfg_.inPlace ? ", in place)" : ")")};
    }
    if (!maxAny || a.hi > maxAny->hi) maxAny = &a;
    if (a.write && (!maxWrite || a.hi > maxWrite->hi)) maxWrite = &a;
  }
}

void Simulator::checkData() {
  for (int c = 0; c < cfg_.calls; ++c) {
    std::vector<const uint8_t*> sends(n_);
    for (int r = 0; r < n_; ++r) sends[r] = initial_[userRegion_[(c * n_ + r) * 2]].data() + sendBase_[r];
    const std::vector<std::vector<uint8_t>> want = referenceOutputs(p_, ops_, sends);
    for (int r = 0; r < n_; ++r) {
      const int sendRegion = userRegion_[(c * n_ + r) * 2], recvRegion = userRegion_[(c * n_ + r) * 2 + 1];
      std::vector<uint8_t> expectRecv = initial_[recvRegion];
      if (!want[r].empty()) std::copy(want[r].begin(), want[r].end(), expectRecv.begin() + recvBase_[r]);
      auto compare = [&](int region, const std::vector<uint8_t>& expect, bool isRecvRegion) {
        const std::vector<uint8_t>& got = regions_[region];
        if (got.empty() || std::memcmp(got.data(), expect.data(), got.size()) == 0) return;
        const auto diff = std::mismatch(got.begin(), got.end(), expect.begin());
        if (diff.first == got.end()) return;
        const uint64_t byte = static_cast<uint64_t>(diff.first - got.begin());
        const uint64_t base = isRecvRegion ? recvBase_[r] : sendBase_[r];
        const uint64_t limit = isRecvRegion ? sizes_.recv : sizes_.send;
        std::string what;
        uint64_t elem = byte / elt_;
        if (byte >= base && byte < base + limit) {
          what = isRecvRegion ? "recv" : "send";
          elem = (byte - base) / elt_;
        } else {
          what = cfg_.inPlace ? "in-place buffer outside recv" : "send";
        }
        const uint64_t first = byte / elt_ * elt_;
        const bool untouched = isRecvRegion && want[r].empty();
        throw SimFailure{"wrong result: call " + std::to_string(c) + ", rank " + std::to_string(r) + ": " + what +
                         " element " + std::to_string(elem) + " is " + std::to_string(ops_.load(got.data() + first, 0)) +
                         ", expected " + std::to_string(ops_.load(expect.data() + first, 0)) +
                         (untouched ? " (this buffer must not be written)" : "")};
      };
      compare(recvRegion, expectRecv, true);
      if (sendRegion != recvRegion) compare(sendRegion, initial_[sendRegion], false);
    }
  }
}

}  // namespace conflux::simdetail
