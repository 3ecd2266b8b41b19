#include "algorithms/op_graph.h"

#include <algorithm>
#include <map>
#include <utility>

namespace conflux {
namespace {

constexpr uint32_t kNone = OpGraph::kNone;

// One buffer's bytes, cut into disjoint ranges by the accesses so far: for each range, the last
// operation that wrote it and those that read it since.
struct Range {
  int64_t end = 0;
  uint32_t writer = kNone;
  std::vector<uint32_t> readers;
};
using RangeMap = std::map<int64_t, Range>;  // by start

// Which buffer a reference names, as far as aliasing goes: kind and owner (-1: this rank).
struct BufKey {
  BufKind kind;
  int32_t owner;
  auto operator<=>(const BufKey&) const = default;
};

class GraphBuilder {
 public:
  GraphBuilder(int rank, std::optional<int64_t> sendInRecv) : rank_(rank), sendInRecv_(sendInRecv) {}

  /// The dependencies of `op` (index i) on earlier operations, then its accesses recorded.
  void add(const Plan& plan, uint32_t i, std::vector<uint32_t>& out) {
    const Op& op = plan.ops[i];
    out.clear();
    if (op.kind == OpKind::Barrier) {
      // A fence: everything before it completes first, so nothing before it needs remembering.
      maps_.clear();
      fence_ = i;
      return;
    }
    if (fence_ != kNone) out.push_back(fence_);
    accesses_.clear();
    auto read = [&](const BufRef& r) { accesses_.push_back({r, false}); };
    auto write = [&](const BufRef& r) { accesses_.push_back({r, true}); };
    switch (op.kind) {
      case OpKind::Send: read(plan.src(op, 0)); break;
      case OpKind::Recv: write(op.dst); break;
      case OpKind::Finalize: write(op.dst); break;  // reads and writes its bytes
      default:
        for (uint32_t k = 0; k < op.nsrc; ++k) read(plan.src(op, k));
        write(op.dst);
        if (op.kind == OpKind::ReduceSpread) {
          for (uint32_t k = 0; k < op.nextra; ++k) write(plan.extraDst(op, k));
        }
        break;
    }
    for (const auto& [ref, isWrite] : accesses_) collect(ref, op.bytes, isWrite, out);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    std::erase(out, i);
    // Reads first: a write of the same bytes (RecvReduce's dst = src) then supersedes them.
    for (const auto& [ref, isWrite] : accesses_) {
      if (!isWrite) mark(ref, op.bytes, i, false);
    }
    for (const auto& [ref, isWrite] : accesses_) {
      if (isWrite) mark(ref, op.bytes, i, true);
    }
  }

 private:
  // The buffer and starting byte `ref` names; in place, the send buffer's bytes are the receive
  // buffer's.
  std::pair<BufKey, int64_t> locate(const BufRef& ref) const {
    const int32_t owner = ref.rank == rank_ ? -1 : ref.rank;
    const auto off = static_cast<int64_t>(ref.offset);
    if (ref.kind == BufKind::Send && owner == -1 && sendInRecv_) return {{BufKind::Recv, -1}, off + *sendInRecv_};
    return {{ref.kind, owner}, off};
  }

  void collect(const BufRef& ref, uint64_t bytes, bool isWrite, std::vector<uint32_t>& out) {
    if (bytes == 0) return;
    auto [key, lo] = locate(ref);
    auto m = maps_.find(key);
    if (m == maps_.end()) return;
    const int64_t hi = lo + static_cast<int64_t>(bytes);
    RangeMap& map = m->second;
    auto it = map.upper_bound(lo);
    if (it != map.begin()) --it;
    for (; it != map.end() && it->first < hi; ++it) {
      if (it->second.end <= lo) continue;
      if (it->second.writer != kNone) out.push_back(it->second.writer);
      if (isWrite) out.insert(out.end(), it->second.readers.begin(), it->second.readers.end());
    }
  }

  // Splits the range holding byte `at` (if any starts before it and ends after it) in two.
  static void split(RangeMap& map, int64_t at) {
    auto it = map.upper_bound(at);
    if (it == map.begin()) return;
    --it;
    if (it->first == at || it->second.end <= at) return;
    Range tail = it->second;
    it->second.end = at;
    map.emplace(at, std::move(tail));
  }

  void mark(const BufRef& ref, uint64_t bytes, uint32_t i, bool isWrite) {
    if (bytes == 0) return;
    auto [key, lo] = locate(ref);
    const int64_t hi = lo + static_cast<int64_t>(bytes);
    RangeMap& map = maps_[key];
    split(map, lo);
    split(map, hi);
    int64_t cursor = lo;
    auto it = map.lower_bound(lo);
    while (cursor < hi) {
      if (it == map.end() || it->first > cursor) {
        // A gap nobody touched yet: a new range up to the next one.
        const int64_t end = it == map.end() ? hi : std::min(hi, it->first);
        Range r;
        r.end = end;
        if (isWrite) r.writer = i;
        else r.readers.push_back(i);
        it = std::next(map.emplace_hint(it, cursor, std::move(r)));
        cursor = end;
        continue;
      }
      Range& r = it->second;
      if (isWrite) {
        r.writer = i;
        r.readers.clear();
      } else if (r.readers.empty() || r.readers.back() != i) {
        r.readers.push_back(i);
      }
      cursor = r.end;
      ++it;
    }
  }

  int rank_;
  std::optional<int64_t> sendInRecv_;
  std::map<BufKey, RangeMap> maps_;
  uint32_t fence_ = kNone;
  std::vector<std::pair<BufRef, bool>> accesses_;
};

}  // namespace

OpGraph buildOpGraph(const Plan& plan, int rank, std::optional<int64_t> sendInRecv) {
  OpGraph g;
  const auto n = static_cast<uint32_t>(plan.ops.size());
  g.sendInRecv = sendInRecv;
  g.order.reserve(n);
  g.roundOf.assign(n, 0);
  g.channelPrev.assign(n, kNone);
  g.depStart.assign(n + 1, 0);
  g.roundEnd.assign(plan.rounds.size(), 0);
  for (uint32_t r = 0; r < plan.rounds.size(); ++r) {
    const Round& round = plan.rounds[r];
    for (int pass = 0; pass < 2; ++pass) {  // communication first, then the local operations
      for (uint32_t i = round.firstOp; i < round.firstOp + round.numOps; ++i) {
        if (isCommOp(plan.ops[i].kind) != (pass == 0)) continue;
        g.order.push_back(i);
        g.roundOf[i] = r;
      }
    }
    g.roundEnd[r] = static_cast<uint32_t>(g.order.size());
  }
  // Dependencies in program order; each op's list is stored at its own index.
  std::vector<std::vector<uint32_t>> lists(n);
  GraphBuilder builder(rank, sendInRecv);
  std::map<std::pair<int32_t, bool>, uint32_t> lastOnChannel;
  auto extend = [&](uint64_t& extent, const BufRef& ref, uint64_t bytes) {
    if ((ref.kind == BufKind::Send || ref.kind == BufKind::Recv) && (ref.rank < 0 || ref.rank == rank)) {
      extent = std::max(extent, ref.offset + bytes);
    }
  };
  for (uint32_t i : g.order) {
    const Op& op = plan.ops[i];
    builder.add(plan, i, lists[i]);
    if (op.kind == OpKind::Send || op.kind == OpKind::Recv || op.kind == OpKind::RecvReduce) {
      auto [it, fresh] = lastOnChannel.try_emplace({op.peer, op.kind == OpKind::Send}, i);
      if (!fresh) {
        g.channelPrev[i] = it->second;
        it->second = i;
      }
    }
    if (op.kind != OpKind::Barrier) {
      const uint32_t nsrc = op.nsrc + (op.kind == OpKind::ReduceSpread ? op.nextra : 0);
      for (uint32_t k = 0; k < nsrc; ++k) {
        const BufRef& ref = plan.sources[op.firstSrc + k];
        extend(ref.kind == BufKind::Send ? g.sendExtent : g.recvExtent, ref, op.bytes);
      }
      if (op.kind != OpKind::Send) extend(op.dst.kind == BufKind::Send ? g.sendExtent : g.recvExtent, op.dst, op.bytes);
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    g.depStart[i] = static_cast<uint32_t>(g.deps.size());
    g.deps.insert(g.deps.end(), lists[i].begin(), lists[i].end());
  }
  g.depStart[n] = static_cast<uint32_t>(g.deps.size());
  return g;
}

std::optional<int64_t> sendInRecvOf(const OpGraph& g, const void* send, const void* recv) {
  const auto s = reinterpret_cast<uintptr_t>(send);
  const auto r = reinterpret_cast<uintptr_t>(recv);
  // Point-to-point batches: both null, offsets are addresses in one space.
  const bool overlap = s == r || (s < r + g.recvExtent && r < s + g.sendExtent);
  if (!overlap) return std::nullopt;
  return static_cast<int64_t>(s - r);
}

}  // namespace conflux
