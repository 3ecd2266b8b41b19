// Element arithmetic and the reference results the simulator compares against.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "algorithms/simulator_internal.h"

namespace conflux::simdetail {
namespace {

template <typename T, typename F>
void apply(uint8_t* acc, const uint8_t* x, uint64_t count, F f) {
  for (uint64_t i = 0; i < count; ++i) {
    T a, b;
    std::memcpy(&a, acc + i * sizeof(T), sizeof(T));
    std::memcpy(&b, x + i * sizeof(T), sizeof(T));
    a = f(a, b);
    std::memcpy(acc + i * sizeof(T), &a, sizeof(T));
  }
}

template <typename T>
void combineT(RedOp op, uint8_t* acc, const uint8_t* x, uint64_t count) {
  using W = std::conditional_t<(sizeof(T) < sizeof(uint32_t)), uint32_t, T>;  // no signed promotion
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg:
    case RedOp::PreMulSum: apply<T>(acc, x, count, [](T a, T b) { return static_cast<T>(W(a) + W(b)); }); break;
    case RedOp::Prod: apply<T>(acc, x, count, [](T a, T b) { return static_cast<T>(W(a) * W(b)); }); break;
    case RedOp::Max: apply<T>(acc, x, count, [](T a, T b) { return std::max(a, b); }); break;
    case RedOp::Min: apply<T>(acc, x, count, [](T a, T b) { return std::min(a, b); }); break;
    case RedOp::Band: apply<T>(acc, x, count, [](T a, T b) { return static_cast<T>(a & b); }); break;
    case RedOp::Bor: apply<T>(acc, x, count, [](T a, T b) { return static_cast<T>(a | b); }); break;
    case RedOp::Bxor: apply<T>(acc, x, count, [](T a, T b) { return static_cast<T>(a ^ b); }); break;
  }
}

template <typename T>
void scaleT(uint8_t* buf, uint64_t count, uint64_t s) {
  using W = std::conditional_t<(sizeof(T) < sizeof(uint32_t)), uint32_t, T>;
  apply<T>(buf, buf, count, [s](T a, T) { return static_cast<T>(W(a) * static_cast<W>(s)); });
}

template <typename T>
void divideT(uint8_t* buf, uint64_t count, int n) {
  apply<T>(buf, buf, count, [n](T a, T) { return static_cast<T>(uint64_t{a} / static_cast<uint64_t>(n)); });
}

}  // namespace

void ElementOps::combine(uint8_t* acc, const uint8_t* x, uint64_t bytes) const {
  const uint64_t count = bytes / elt;
  switch (elt) {
    case 1: combineT<uint8_t>(op, acc, x, count); break;
    case 2: combineT<uint16_t>(op, acc, x, count); break;
    case 4: combineT<uint32_t>(op, acc, x, count); break;
    default: combineT<uint64_t>(op, acc, x, count); break;
  }
}

void ElementOps::finalize(uint8_t* buf, uint64_t bytes) const {
  if (op != RedOp::Avg) return;
  const uint64_t count = bytes / elt;
  switch (elt) {
    case 1: divideT<uint8_t>(buf, count, nranks); break;
    case 2: divideT<uint16_t>(buf, count, nranks); break;
    case 4: divideT<uint32_t>(buf, count, nranks); break;
    default: divideT<uint64_t>(buf, count, nranks); break;
  }
}

void ElementOps::scale(uint8_t* buf, uint64_t bytes, int r) const {
  if (op != RedOp::PreMulSum) return;
  const uint64_t count = bytes / elt, s = scalarOf(r);
  switch (elt) {
    case 1: scaleT<uint8_t>(buf, count, s); break;
    case 2: scaleT<uint16_t>(buf, count, s); break;
    case 4: scaleT<uint32_t>(buf, count, s); break;
    default: scaleT<uint64_t>(buf, count, s); break;
  }
}

uint64_t ElementOps::load(const uint8_t* buf, uint64_t i) const {
  uint64_t v = 0;
  std::memcpy(&v, buf + i * elt, elt);  // little-endian hosts
  return v;
}

std::vector<std::vector<uint8_t>> referenceOutputs(const PlanParams& p, const ElementOps& ops,
                                                   const std::vector<const uint8_t*>& sends) {
  const int n = p.nranks;
  const uint64_t block = p.count * p.eltSize;
  const BufferSizes sizes = bufferSizes(p);
  std::vector<std::vector<uint8_t>> out(n);
  // Reduction of bytes [off, off + len) of every rank's send buffer.
  auto reduceAll = [&](uint64_t off, uint64_t len) {
    std::vector<uint8_t> acc(sends[0] + off, sends[0] + off + len);
    ops.scale(acc.data(), len, 0);
    for (int q = 1; q < n; ++q) {
      std::vector<uint8_t> x(sends[q] + off, sends[q] + off + len);
      ops.scale(x.data(), len, q);
      ops.combine(acc.data(), x.data(), len);
    }
    ops.finalize(acc.data(), len);
    return acc;
  };
  switch (p.coll) {
    case Collective::AllReduce: {
      const std::vector<uint8_t> all = reduceAll(0, block);
      for (int r = 0; r < n; ++r) out[r] = all;
      break;
    }
    case Collective::Reduce: out[p.root] = reduceAll(0, block); break;
    case Collective::Broadcast:
      for (int r = 0; r < n; ++r) out[r].assign(sends[p.root], sends[p.root] + block);
      break;
    case Collective::AllGather:
      for (int r = 0; r < n; ++r) {
        out[r].resize(sizes.recv);
        for (int q = 0; q < n; ++q) {
          if (block) std::memcpy(out[r].data() + q * block, sends[q], block);
        }
      }
      break;
    case Collective::ReduceScatter:
      for (int r = 0; r < n; ++r) out[r] = reduceAll(r * block, block);
      break;
    case Collective::AllToAll:
      for (int r = 0; r < n; ++r) {
        out[r].resize(sizes.recv);
        for (int q = 0; q < n; ++q) {
          if (block) std::memcpy(out[r].data() + q * block, sends[q] + r * block, block);
        }
      }
      break;
    case Collective::SendRecv: break;
  }
  return out;
}

}  // namespace conflux::simdetail
