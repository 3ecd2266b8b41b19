#include "src/vector_collectives.h"

#include <algorithm>
#include <string>
#include <utility>

namespace conflux {
namespace {

// Largest byte count of one buffer: keeps every offset computation far from overflow (as validate.cc).
constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 60;

Status bad(const std::string& msg) { return Status(Code::InvalidArgument, msg); }

P2pOp sendOp(const void* buf, uint64_t bytes, int peer, void* stream) { return P2pOp{true, buf, bytes, peer, stream}; }
P2pOp recvOp(void* buf, uint64_t bytes, int peer, void* stream) { return P2pOp{false, buf, bytes, peer, stream}; }

/// Checks that elements [displ, displ + count) of a buffer are addressable; returns the byte range.
Status rangeOf(const char* what, int peer, size_t count, size_t displ, uint64_t elt, uint64_t& lo, uint64_t& hi) {
  if (count > kMaxBufferBytes / elt || displ > kMaxBufferBytes / elt || count * elt + displ * elt > kMaxBufferBytes) {
    return bad(std::string(what) + "[" + std::to_string(peer) + "]: " + std::to_string(count) + " elements at " +
               std::to_string(displ) + " overflow the buffer size");
  }
  lo = displ * elt;
  hi = lo + count * elt;
  return Status::ok();
}

/// The root and the per-rank block of a gather or scatter: checks both; `countName` names the count.
Status rootedBlock(const char* fn, const char* countName, const VectorCall& c, int nranks, uint64_t& block) {
  if (c.root < 0 || c.root >= nranks) {
    return bad(std::string(fn) + ": root " + std::to_string(c.root) + " is not a rank in [0, " +
               std::to_string(nranks) + ")");
  }
  const uint64_t elt = dataTypeSize(c.dtype);
  if (c.count > kMaxBufferBytes / elt / static_cast<uint64_t>(nranks)) {
    return bad(std::string(fn) + ": " + countName + " " + std::to_string(c.count) + " x " + std::to_string(nranks) +
               " ranks overflows the buffer size");
  }
  block = c.count * elt;
  return Status::ok();
}

/// Whether the root's one-block buffer `own` overlaps its nranks-block buffer `all` anywhere but exactly
/// at the root's own block (the one in-place layout a gather or scatter accepts).
bool badOverlap(const std::byte* all, const std::byte* own, int root, int nranks, uint64_t block) {
  return own != all + static_cast<uint64_t>(root) * block && own < all + static_cast<uint64_t>(nranks) * block &&
         all < own + block;
}

}  // namespace

Status gatherOps(const VectorCall& c, int rank, int nranks, std::vector<P2pOp>& ops) {
  uint64_t block = 0;
  if (Status s = rootedBlock("cfxGather", "sendcount", c, nranks, block); !s) return s;
  ops.clear();
  if (block == 0) return Status::ok();
  if (c.send == nullptr) return bad("sendbuff is NULL with sendcount " + std::to_string(c.count));
  ops.push_back(sendOp(c.send, block, c.root, c.stream));
  if (rank != c.root) return Status::ok();
  if (c.recv == nullptr) return bad("recvbuff is NULL on the root with sendcount " + std::to_string(c.count));
  auto* recv = static_cast<std::byte*>(c.recv);
  const auto* send = static_cast<const std::byte*>(c.send);
  if (badOverlap(recv, send, rank, nranks, block)) {
    return bad("cfxGather: sendbuff and recvbuff overlap but sendbuff is not the root's block of recvbuff");
  }
  for (int q = 0; q < nranks; ++q) ops.push_back(recvOp(recv + static_cast<uint64_t>(q) * block, block, q, c.stream));
  return Status::ok();
}

Status scatterOps(const VectorCall& c, int rank, int nranks, std::vector<P2pOp>& ops) {
  uint64_t block = 0;
  if (Status s = rootedBlock("cfxScatter", "recvcount", c, nranks, block); !s) return s;
  ops.clear();
  if (block == 0) return Status::ok();
  if (c.recv == nullptr) return bad("recvbuff is NULL with recvcount " + std::to_string(c.count));
  if (rank == c.root) {
    if (c.send == nullptr) return bad("sendbuff is NULL on the root with recvcount " + std::to_string(c.count));
    const auto* send = static_cast<const std::byte*>(c.send);
    const auto* recv = static_cast<const std::byte*>(c.recv);
    if (badOverlap(send, recv, rank, nranks, block)) {
      return bad("cfxScatter: sendbuff and recvbuff overlap but recvbuff is not the root's block of sendbuff");
    }
    for (int q = 0; q < nranks; ++q) ops.push_back(sendOp(send + static_cast<uint64_t>(q) * block, block, q, c.stream));
  }
  ops.push_back(recvOp(c.recv, block, c.root, c.stream));
  return Status::ok();
}

Status allToAllvOps(const VectorCall& c, int rank, int nranks, std::vector<P2pOp>& ops) {
  (void)rank;
  if (c.sendCounts == nullptr) return bad("sendcounts is NULL");
  if (c.sendDispls == nullptr) return bad("sdispls is NULL");
  if (c.recvCounts == nullptr) return bad("recvcounts is NULL");
  if (c.recvDispls == nullptr) return bad("rdispls is NULL");
  const uint64_t elt = dataTypeSize(c.dtype);
  ops.clear();
  std::vector<std::pair<uint64_t, uint64_t>> recvRanges;
  uint64_t sendLo = UINT64_MAX, sendHi = 0;
  for (int q = 0; q < nranks; ++q) {
    uint64_t lo = 0, hi = 0;
    if (Status s = rangeOf("sendcounts/sdispls", q, c.sendCounts[q], c.sendDispls[q], elt, lo, hi); !s) return s;
    if (hi > lo) {
      if (c.send == nullptr) return bad("sendbuff is NULL with sendcounts[" + std::to_string(q) + "] > 0");
      sendLo = std::min(sendLo, lo);
      sendHi = std::max(sendHi, hi);
    }
    if (Status s = rangeOf("recvcounts/rdispls", q, c.recvCounts[q], c.recvDispls[q], elt, lo, hi); !s) return s;
    if (hi > lo) {
      if (c.recv == nullptr) return bad("recvbuff is NULL with recvcounts[" + std::to_string(q) + "] > 0");
      recvRanges.emplace_back(lo, hi);
    }
  }
  // Receives land concurrently: their regions must be disjoint, and apart from everything sent.
  std::sort(recvRanges.begin(), recvRanges.end());
  for (size_t i = 1; i < recvRanges.size(); ++i) {
    if (recvRanges[i].first < recvRanges[i - 1].second) return bad("rdispls/recvcounts: receive regions overlap");
  }
  const auto send = reinterpret_cast<uintptr_t>(c.send), recv = reinterpret_cast<uintptr_t>(c.recv);
  for (const auto& [lo, hi] : recvRanges) {
    if (sendHi > sendLo && recv + lo < send + sendHi && send + sendLo < recv + hi) {
      return bad("cfxAllToAllv: a receive region overlaps the data sent (in place is not supported)");
    }
  }
  for (int q = 0; q < nranks; ++q) {
    if (c.sendCounts[q] > 0) {
      ops.push_back(sendOp(static_cast<const std::byte*>(c.send) + c.sendDispls[q] * elt, c.sendCounts[q] * elt, q, c.stream));
    }
    if (c.recvCounts[q] > 0) {
      ops.push_back(recvOp(static_cast<std::byte*>(c.recv) + c.recvDispls[q] * elt, c.recvCounts[q] * elt, q, c.stream));
    }
  }
  return Status::ok();
}

}  // namespace conflux
