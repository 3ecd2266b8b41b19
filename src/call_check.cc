#include "src/call_check.h"

#include "core/types.h"

namespace conflux {

transport::CallDescriptor describeCall(uint64_t seq, Collective coll, DataType dtype, RedOp op, int root, uint64_t count) {
  transport::CallDescriptor d;
  d.seq = seq;
  d.coll = static_cast<uint32_t>(coll);
  d.dtype = static_cast<uint32_t>(dtype);
  d.op = static_cast<uint32_t>(op);
  d.root = root;
  d.count = count;
  return d;
}

std::string callMismatch(const transport::CallDescriptor& mine, const transport::CallDescriptor& peer) {
  const auto coll = static_cast<Collective>(mine.coll);
  auto collOf = [](uint32_t c) { return std::string(collectiveName(static_cast<Collective>(c))); };
  if (peer.coll != mine.coll) return "collective " + collOf(mine.coll) + " vs " + collOf(peer.coll);
  if (coll == Collective::SendRecv) return {};
  if (peer.count != mine.count) return "count " + std::to_string(mine.count) + " vs " + std::to_string(peer.count);
  if (peer.dtype != mine.dtype) {
    return "datatype " + std::string(dataTypeName(static_cast<DataType>(mine.dtype))) + " vs " +
           std::string(dataTypeName(static_cast<DataType>(peer.dtype)));
  }
  const bool reduces =
      coll == Collective::AllReduce || coll == Collective::Reduce || coll == Collective::ReduceScatter;
  if (reduces && peer.op != mine.op) {
    return "op " + std::string(redOpName(static_cast<RedOp>(mine.op))) + " vs " +
           std::string(redOpName(static_cast<RedOp>(peer.op)));
  }
  const bool rooted = coll == Collective::Reduce || coll == Collective::Broadcast;
  if (rooted && peer.root != mine.root) return "root " + std::to_string(mine.root) + " vs " + std::to_string(peer.root);
  return {};
}

}  // namespace conflux
