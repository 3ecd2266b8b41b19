// The plan simulator: setup and execution (see simulator.h for the model).
#include "algorithms/simulator.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>

#include "algorithms/simulator_internal.h"
#include "core/error.h"

namespace conflux {
namespace simdetail {

Simulator::Simulator(const SimConfig& cfg, const PlanFactory& makePlan)
    : cfg_(cfg), p_(cfg.params), n_(cfg.params.nranks), elt_(cfg.params.eltSize) {
  if (n_ < 1) throw SimFailure{"nranks must be >= 1"};
  if (elt_ != 1 && elt_ != 2 && elt_ != 4 && elt_ != 8) throw SimFailure{"eltSize must be 1, 2, 4 or 8"};
  if (cfg_.calls < 1) throw SimFailure{"calls must be >= 1"};
  if (p_.coll == Collective::SendRecv) throw SimFailure{"sendrecv is not simulated"};
  if (cfg_.inPlace && p_.coll == Collective::AllToAll) throw SimFailure{"alltoall has no in-place form"};
  sizes_ = bufferSizes(p_);
  // Data-movement collectives take no op (the API passes Sum), so nothing of theirs is scaled.
  const bool reduces = p_.coll == Collective::AllReduce || p_.coll == Collective::Reduce ||
                       p_.coll == Collective::ReduceScatter;
  ops_ = ElementOps{elt_, reduces ? cfg_.op : RedOp::Sum, n_};
  buildPlans(makePlan);
}

void Simulator::buildPlans(const PlanFactory& makePlan) {
  plans_.reserve(n_);
  for (int r = 0; r < n_; ++r) {
    PlanParams p = p_;
    p.rank = r;
    try {
      plans_.push_back(makePlan(p));
    } catch (const Error& e) {
      throw SimFailure{"building rank " + std::to_string(r) + "'s plan failed: " + e.what()};
    }
  }
  sendBase_.assign(n_, 0);
  recvBase_.assign(n_, 0);
  if (cfg_.inPlace) {
    for (int r = 0; r < n_; ++r) {
      if (p_.coll == Collective::AllGather) sendBase_[r] = r * p_.count * elt_;
      if (p_.coll == Collective::ReduceScatter) recvBase_[r] = r * p_.count * elt_;
    }
  }
  for (int r = 0; r < n_; ++r) {
    for (const BufRef& ref : plans_[r].sources) peerPlans_ |= ref.kind != BufKind::Staging && ref.kind != BufKind::Scratch && ref.rank >= 0;
    for (const Op& op : plans_[r].ops) {
      peerPlans_ |= op.dst.kind != BufKind::Staging && op.dst.kind != BufKind::Scratch && op.dst.rank >= 0;
    }
  }
  for (int r = 0; r < n_; ++r) validate(r);
  // Staging use must be uniform across ranks: it selects the staging area of the call.
  const bool staged = plans_[0].stagingBytes > 0;
  for (int r = 1; r < n_; ++r) {
    if ((plans_[r].stagingBytes > 0) != staged) {
      throw SimFailure{"ranks disagree on staging use: rank 0 declares stagingBytes " +
                       std::to_string(plans_[0].stagingBytes) + ", rank " + std::to_string(r) + " declares " +
                       std::to_string(plans_[r].stagingBytes)};
    }
  }
  int epoch = 0;
  for (int c = 0; c < cfg_.calls; ++c) stagingArea_.push_back(staged ? (epoch++ & 1) : -1);
}

void Simulator::allocate() {
  uint64_t state = cfg_.seed * 0x9E3779B97F4A7C15ull + 12345;
  auto next = [&state] {  // splitmix64: cheap, and plenty random for test data
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  auto newRegion = [&](uint64_t bytes) {
    std::vector<uint8_t> v(bytes);
    for (uint64_t i = 0; i < bytes; i += 8) {
      const uint64_t x = next();
      std::memcpy(v.data() + i, &x, std::min<uint64_t>(8, bytes - i));
    }
    regions_.push_back(std::move(v));
    return static_cast<int>(regions_.size() - 1);
  };
  const uint64_t inPlaceBytes = std::max(sizes_.send, sizes_.recv);
  for (int c = 0; c < cfg_.calls; ++c) {
    for (int r = 0; r < n_; ++r) {
      if (cfg_.inPlace) {
        const int u = newRegion(inPlaceBytes);
        userRegion_.push_back(u);
        userRegion_.push_back(u);
      } else {
        userRegion_.push_back(newRegion(sizes_.send));
        userRegion_.push_back(newRegion(sizes_.recv));
      }
    }
  }
  initial_ = regions_;
  for (int r = 0; r < n_; ++r) scratchRegion_.push_back(newRegion(plans_[r].scratchBytes));
  // Two staging areas per rank; the plans only use [0, stagingBytes) of an area, so the simulated areas
  // are as large as the largest plan needs (the executor's are PlanParams::stagingBytes each).
  for (int r = 0; r < n_; ++r) stagingStride_ = std::max(stagingStride_, plans_[r].stagingBytes);
  stagingStride_ = (stagingStride_ + elt_ - 1) / elt_ * elt_;
  for (int r = 0; r < n_; ++r) {
    stagingRegion_.push_back(newRegion(2 * stagingStride_));
    marks_.emplace_back(2 * stagingStride_ / elt_ + 1);
  }
  ranks_.assign(n_, RankState{});
  channels_.reserve(4 * static_cast<size_t>(n_));
  for (int r = 0; r < n_; ++r) advanceCalls(r);
}

Phys Simulator::phys(int r, int call, const BufRef& ref) const {
  switch (ref.kind) {
    case BufKind::Send: {
      const int owner = ref.rank < 0 ? r : ref.rank;
      return {userRegion_[(call * n_ + owner) * 2], sendBase_[owner] + ref.offset};
    }
    case BufKind::Recv: {
      const int owner = ref.rank < 0 ? r : ref.rank;
      return {userRegion_[(call * n_ + owner) * 2 + 1], recvBase_[owner] + ref.offset};
    }
    case BufKind::Scratch: return {scratchRegion_[r], ref.offset};
    case BufKind::Staging: {
      const int owner = ref.rank < 0 ? r : ref.rank;
      const int area = std::max(0, stagingArea_[call]);
      return {stagingRegion_[owner], area * stagingStride_ + ref.offset};
    }
  }
  return {};
}

void Simulator::touchShared(int r, int call, const BufRef& ref, uint64_t bytes, bool write, uint32_t opIdx) {
  if (ref.kind == BufKind::Scratch) return;
  const bool user = ref.kind != BufKind::Staging;
  if (user && !peerPlans_) return;
  const int owner = ref.rank < 0 ? r : ref.rank;
  if (user && owner != r && ranks_[r].epoch <= ranks_[r].callBarrierBase) {
    throw SimFailure{"early peer access: " + where(r, call, ranks_[r].round, opIdx) + " touches " +
                     refName(r, ref, bytes) + " before the call's first Barrier (rank " + std::to_string(owner) +
                     " may not have entered the call)"};
  }
  const Phys ph = phys(r, call, ref);
  const int32_t epoch = ranks_[r].epoch;
  std::vector<StagingMark>& marks = user ? userMarks_[ph.region] : marks_[owner];
  if (user && marks.empty()) marks.resize(regions_[ph.region].size() / elt_ + 1);
  for (uint64_t u = ph.off / elt_; u < (ph.off + bytes) / elt_; ++u) {
    StagingMark& m = marks[u];
    int32_t other = -1;
    const char* kind = nullptr;
    if (m.wEpoch == epoch && m.wRank != r) {
      other = m.wRank;
      kind = write ? "also wrote" : "wrote";
    } else if (write && m.rEpoch == epoch && m.rRank != r) {
      other = m.rRank;
      kind = "read";
    }
    if (kind) {
      const std::string who = other == kManyReaders ? "several ranks" : "rank " + std::to_string(other);
      throw SimFailure{std::string(user ? "buffer race: " : "staging race: ") + where(r, call, ranks_[r].round, opIdx) +
                       (write ? " writes " : " reads ") + std::string(bufKindName(ref.kind)) + " of rank " +
                       std::to_string(owner) + " element " + std::to_string(u) +
                       " (area byte " + std::to_string(u * elt_) + "), which " + who + " " + kind +
                       " in the same barrier epoch " + std::to_string(epoch) + " (no Barrier in between)"};
    }
    if (write) {
      m.wEpoch = epoch;
      m.wRank = r;
    } else if (m.rEpoch != epoch) {
      m.rEpoch = epoch;
      m.rRank = r;
    } else if (m.rRank != r) {
      m.rRank = kManyReaders;
    }
  }
}

SimResult Simulator::run() {
  allocate();
  std::mt19937_64 rng(cfg_.seed + 0x51ED270B);
  std::vector<int> order(n_);
  for (int r = 0; r < n_; ++r) order[r] = r;
  while (doneCount_ < n_) {
    std::shuffle(order.begin(), order.end(), rng);
    bool progress = false;
    for (int r : order) progress = step(r) || progress;
    if (!progress) deadlock();
  }
  checkData();
  return result_;
}

void Simulator::advanceCalls(int r) {
  RankState& st = ranks_[r];
  while (!st.done && st.round >= plans_[r].rounds.size()) {
    st.round = 0;
    if (++st.call == cfg_.calls) {
      st.done = true;
      ++doneCount_;
    }
  }
}

bool Simulator::step(int r) {
  RankState& st = ranks_[r];
  if (st.done) return false;
  if (!st.posted) {
    st.posted = true;
    post(r);
    return true;
  }
  if (!st.waiting.empty()) return false;
  runLocal(r);
  ++result_.rounds;
  st.posted = false;
  ++st.round;
  advanceCalls(r);
  return true;
}

void Simulator::post(int r) {
  RankState& st = ranks_[r];
  const Plan& plan = plans_[r];
  const Round& rd = plan.rounds[st.round];
  if (st.round == 0) st.callBarrierBase = st.barriersPosted;
  for (uint32_t i = rd.firstOp; i < rd.firstOp + rd.numOps; ++i) {
    if (isCommOp(plan.ops[i].kind)) st.waiting.push_back(i);
  }
  for (uint32_t i = rd.firstOp; i < rd.firstOp + rd.numOps; ++i) {
    const Op& op = plan.ops[i];
    const Pending me{r, st.call, st.round, i};
    if (op.kind == OpKind::Send) {
      channels_[static_cast<uint64_t>(r) * n_ + op.peer].sends.push_back(me);
      match(r, op.peer);
    } else if (op.kind == OpKind::Recv || op.kind == OpKind::RecvReduce) {
      channels_[static_cast<uint64_t>(op.peer) * n_ + r].recvs.push_back(me);
      match(op.peer, r);
    } else if (op.kind == OpKind::Barrier) {
      arrive(r, i);
    }
  }
}

void Simulator::finishWait(int r, uint32_t opIdx) {
  auto& w = ranks_[r].waiting;
  auto it = std::find(w.begin(), w.end(), opIdx);
  if (it != w.end()) {
    *it = w.back();
    w.pop_back();
  }
}

void Simulator::match(int from, int to) {
  Channel& ch = channels_[static_cast<uint64_t>(from) * n_ + to];
  while (ch.ready()) {
    const Pending s = Channel::pop(ch.sends, ch.sendHead), v = Channel::pop(ch.recvs, ch.recvHead);
    const Op& so = plans_[from].ops[s.op];
    const Op& ro = plans_[to].ops[v.op];
    if (s.call != v.call || so.bytes != ro.bytes) {
      throw SimFailure{std::string(s.call != v.call ? "message crosses calls: " : "size mismatch: ") +
                       where(from, s.call, s.round, s.op) + " sends " + std::to_string(so.bytes) + " bytes to rank " +
                       std::to_string(to) + ", whose matching " + std::string(opKindName(ro.kind)) + " (" +
                       where(to, v.call, v.round, v.op) + ") expects " + std::to_string(ro.bytes) + " bytes"};
    }
    const BufRef& src = plans_[from].src(so, 0);
    std::vector<uint8_t> data(so.bytes);
    touchShared(from, s.call, src, so.bytes, false, s.op);
    std::memcpy(data.data(), ptr(phys(from, s.call, src)), so.bytes);
    if (ownInput(from, src)) ops_.scale(data.data(), so.bytes, from);
    if (ro.kind == OpKind::RecvReduce) {
      const BufRef& mine = plans_[to].src(ro, 0);
      touchShared(to, v.call, mine, ro.bytes, false, v.op);
      std::vector<uint8_t> acc(ptr(phys(to, v.call, mine)), ptr(phys(to, v.call, mine)) + ro.bytes);
      if (ownInput(to, mine)) ops_.scale(acc.data(), ro.bytes, to);
      ops_.combine(acc.data(), data.data(), ro.bytes);
      data.swap(acc);
    }
    touchShared(to, v.call, ro.dst, ro.bytes, true, v.op);
    std::memcpy(ptr(phys(to, v.call, ro.dst)), data.data(), ro.bytes);
    ++result_.messages;
    result_.bytes += so.bytes;
    finishWait(from, s.op);
    finishWait(to, v.op);
  }
}

void Simulator::arrive(int r, uint32_t opIdx) {
  RankState& st = ranks_[r];
  const int64_t k = st.barriersPosted++;
  BarrierState& b = barriers_[k];
  b.waiters.push_back({r, st.call, st.round, opIdx});
  if (b.waiters.front().call != st.call) {
    const Pending& f = b.waiters.front();
    throw SimFailure{"barrier mismatch: barrier #" + std::to_string(k) + " is reached by " +
                     where(f.rank, f.call, f.round, f.op) + " and by " + where(r, st.call, st.round, opIdx) +
                     " (ranks' plans have different numbers of Barriers)"};
  }
  if (++b.arrived < n_) return;
  for (const Pending& w : b.waiters) {
    finishWait(w.rank, w.op);
    ranks_[w.rank].epoch = std::max<int32_t>(ranks_[w.rank].epoch, static_cast<int32_t>(k + 1));
  }
  ++result_.barriers;
  barriers_.erase(k);
}

void Simulator::runLocal(int r) {
  const RankState& st = ranks_[r];
  const Plan& plan = plans_[r];
  const Round& rd = plan.rounds[st.round];
  for (uint32_t i = rd.firstOp; i < rd.firstOp + rd.numOps; ++i) {
    const Op& op = plan.ops[i];
    if (isCommOp(op.kind)) continue;
    const Phys dst = phys(r, st.call, op.dst);
    // The executor skips an in-place Copy, except where it scales the own input (PreMulSum).
    if (op.kind == OpKind::Copy && phys(r, st.call, plan.src(op, 0)) == dst &&
        !(ops_.op == RedOp::PreMulSum && ownInput(r, plan.src(op, 0)))) {
      continue;
    }
    std::vector<uint8_t> acc;
    if (op.kind == OpKind::Finalize) {
      touchShared(r, st.call, op.dst, op.bytes, false, i);
      acc.assign(ptr(dst), ptr(dst) + op.bytes);
      ops_.finalize(acc.data(), op.bytes);
    } else {
      for (uint32_t s = 0; s < op.nsrc; ++s) {
        const BufRef& src = plan.src(op, s);
        touchShared(r, st.call, src, op.bytes, false, i);
        const uint8_t* in = ptr(phys(r, st.call, src));
        if (s == 0) {
          acc.assign(in, in + op.bytes);
          if (ownInput(r, src)) ops_.scale(acc.data(), op.bytes, r);
        } else if (ownInput(r, src) && ops_.op == RedOp::PreMulSum) {
          std::vector<uint8_t> x(in, in + op.bytes);
          ops_.scale(x.data(), op.bytes, r);
          ops_.combine(acc.data(), x.data(), op.bytes);
        } else {
          ops_.combine(acc.data(), in, op.bytes);
        }
      }
    }
    if (op.kind == OpKind::ReduceSpread) ops_.finalize(acc.data(), op.bytes);
    touchShared(r, st.call, op.dst, op.bytes, true, i);
    std::memcpy(ptr(dst), acc.data(), op.bytes);
    for (uint32_t k = 0; op.kind == OpKind::ReduceSpread && k < op.nextra; ++k) {
      const BufRef& extra = plan.extraDst(op, k);
      touchShared(r, st.call, extra, op.bytes, true, i);
      std::memcpy(ptr(phys(r, st.call, extra)), acc.data(), op.bytes);
    }
  }
}

void Simulator::deadlock() {
  std::ostringstream os;
  os << "deadlock: no rank can progress;";
  int shown = 0, stuck = 0;
  for (int r = 0; r < n_; ++r) {
    const RankState& st = ranks_[r];
    if (st.done) continue;
    if (++stuck > 8) continue;
    ++shown;
    os << " rank " << r << " (call " << st.call << ", round " << st.round << ") waits on";
    for (uint32_t i : st.waiting) {
      const Op& op = plans_[r].ops[i];
      os << " op " << i << " (" << opKindName(op.kind);
      if (op.kind == OpKind::Barrier) os << ")";
      else os << (op.kind == OpKind::Send ? " to rank " : " from rank ") << op.peer << ", " << op.bytes << " bytes)";
    }
    os << ";";
  }
  if (stuck > shown) os << " and " << (stuck - shown) << " more ranks";
  throw SimFailure{os.str()};
}

std::string Simulator::where(int r, int call, uint32_t round, uint32_t opIdx) const {
  std::string s = "rank " + std::to_string(r) + (call >= 0 ? ", call " + std::to_string(call) : std::string()) +
                  ", round " + std::to_string(round) + ", op " + std::to_string(opIdx);
  if (opIdx < plans_[r].ops.size()) s += " (" + std::string(opKindName(plans_[r].ops[opIdx].kind)) + ")";
  return s;
}

std::string Simulator::refName(int r, const BufRef& ref, uint64_t bytes) const {
  std::string s(bufKindName(ref.kind));
  if (ref.kind == BufKind::Staging || (ref.kind != BufKind::Scratch && ref.rank >= 0)) {
    s += " of rank " + std::to_string(ref.rank < 0 ? r : ref.rank);
  }
  return s + " [" + std::to_string(ref.offset) + ", " + std::to_string(ref.offset + bytes) + ")";
}

}  // namespace simdetail

SimResult simulate(const SimConfig& cfg, const PlanFactory& makePlan) {
  try {
    simdetail::Simulator sim(cfg, makePlan);
    return sim.run();
  } catch (const simdetail::SimFailure& f) {
    SimResult r;
    r.ok = false;
    r.error = f.message + " [" + describe(cfg) + "]";
    return r;
  }
}

SimResult simulate(const SimConfig& cfg, Algo algo) {
  return simulate(cfg, [algo](const PlanParams& p) { return buildPlan(algo, p); });
}

std::string describe(const SimConfig& cfg) {
  const PlanParams& p = cfg.params;
  std::ostringstream os;
  os << collectiveName(p.coll) << " n=" << p.nranks << " count=" << p.count << " elt=" << p.eltSize;
  if (p.coll == Collective::Reduce || p.coll == Collective::Broadcast) os << " root=" << p.root;
  os << " op=" << redOpName(cfg.op) << " chunk=" << p.chunkBytes << " staging=" << p.stagingBytes
     << (cfg.inPlace ? " in-place" : " out-of-place") << " calls=" << cfg.calls << " seed=" << cfg.seed;
  return os.str();
}

}  // namespace conflux
