#include "src/validate.h"

#include <cstdint>
#include <limits>
#include <string>

namespace conflux {
namespace {

Status bad(const std::string& msg) { return Status(Code::InvalidArgument, msg); }

bool overlaps(const void* a, uint64_t aBytes, const void* b, uint64_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

// Largest byte count we accept for one buffer: keeps every offset computation far from overflow.
constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 60;

}  // namespace

Status validateEnums(int dtype, int op, bool needsOp) {
  if (!isValidDataType(dtype)) {
    return bad("datatype: " + std::to_string(dtype) + " is not a valid cfxDataType_t (0.." +
               std::to_string(kNumDataTypes - 1) + ")");
  }
  if (needsOp && !isValidRedOp(op)) {
    return bad("op: " + std::to_string(op) + " is not a valid cfxRedOp_t (0.." + std::to_string(kNumRedOps - 1) + ")");
  }
  return Status::ok();
}

Status validateCollective(const CallArgs& a, int rank, int nranks) {
  const std::string name(collectiveName(a.coll));
  const uint64_t elt = dataTypeSize(a.dtype);
  const bool reduces = a.coll == Collective::AllReduce || a.coll == Collective::Reduce ||
                       a.coll == Collective::ReduceScatter;
  if (reduces && !opAppliesTo(a.op, a.dtype)) {
    return bad("op: " + std::string(redOpName(a.op)) + " is defined for integer datatypes only (datatype is " +
               std::string(dataTypeName(a.dtype)) + ")");
  }
  bool rooted = a.coll == Collective::Reduce || a.coll == Collective::Broadcast;
  if (rooted && (a.root < 0 || a.root >= nranks)) {
    return bad(name + ": root " + std::to_string(a.root) + " is not a rank in [0, " + std::to_string(nranks) + ")");
  }
  // Element counts of the send and receive buffers.
  uint64_t multiple = 1;
  if (a.coll == Collective::AllGather || a.coll == Collective::ReduceScatter || a.coll == Collective::AllToAll) {
    multiple = static_cast<uint64_t>(nranks);
  }
  if (a.count > kMaxBufferBytes / elt / multiple) {
    return bad(name + ": count " + std::to_string(a.count) + " of " + std::string(dataTypeName(a.dtype)) +
               (multiple > 1 ? " x " + std::to_string(nranks) + " ranks" : std::string()) + " overflows the buffer size");
  }
  if (a.count == 0) return Status::ok();
  uint64_t sendBytes = a.count * elt, recvBytes = a.count * elt;
  if (a.coll == Collective::AllGather) recvBytes *= multiple;
  if (a.coll == Collective::ReduceScatter || a.coll == Collective::AllToAll) sendBytes *= multiple;
  if (a.coll == Collective::AllToAll) recvBytes *= multiple;

  bool needSend = !(a.coll == Collective::Broadcast && rank != a.root);
  bool needRecv = !(a.coll == Collective::Reduce && rank != a.root);
  if (needSend && a.send == nullptr) return bad(name + ": sendbuff is NULL with count " + std::to_string(a.count));
  if (needRecv && a.recv == nullptr) return bad(name + ": recvbuff is NULL with count " + std::to_string(a.count));
  if (!needSend || !needRecv || a.send == a.recv) {
    if (a.coll == Collective::AllToAll && a.send == a.recv) {
      return bad(name + ": in-place is not supported (sendbuff == recvbuff)");
    }
    return Status::ok();
  }
  // Overlapping buffers are only allowed in the collective's own in-place form.
  auto* recv = static_cast<const std::byte*>(a.recv);
  auto* send = static_cast<const std::byte*>(a.send);
  if (a.coll == Collective::AllGather && send == recv + static_cast<uint64_t>(rank) * a.count * elt) return Status::ok();
  if (a.coll == Collective::ReduceScatter && recv == send + static_cast<uint64_t>(rank) * a.count * elt) {
    return Status::ok();
  }
  if (overlaps(a.send, sendBytes, a.recv, recvBytes)) {
    return bad(name + ": sendbuff and recvbuff overlap but are not this collective's in-place layout");
  }
  return Status::ok();
}

Status validateP2p(const void* buf, uint64_t count, int dtype, int peer, int nranks, const char* bufName) {
  if (Status s = validateEnums(dtype, 0, false); !s) return s;
  if (peer < 0 || peer >= nranks) {
    return bad("peer: " + std::to_string(peer) + " is not a rank in [0, " + std::to_string(nranks) + ")");
  }
  uint64_t elt = dataTypeSize(static_cast<DataType>(dtype));
  if (count > kMaxBufferBytes / elt) return bad("count: " + std::to_string(count) + " overflows the buffer size");
  if (count > 0 && buf == nullptr) return bad(std::string(bufName) + " is NULL with count " + std::to_string(count));
  return Status::ok();
}

}  // namespace conflux
