// conflux-perf: collective, datatype and op tables; nccl-tests' count and bandwidth rules.
#include "collectives.h"

#include <stdexcept>

namespace cfxperf {

const std::vector<CollInfo>& allColls() {
  static const std::vector<CollInfo> colls = {
      {Coll::AllReduce, "allreduce", "all_reduce_perf", true, false},
      {Coll::AllGather, "allgather", "all_gather_perf", false, false},
      {Coll::ReduceScatter, "reducescatter", "reduce_scatter_perf", true, false},
      {Coll::Broadcast, "broadcast", "broadcast_perf", false, true},
      {Coll::Reduce, "reduce", "reduce_perf", true, true},
      {Coll::AllToAll, "alltoall", "alltoall_perf", false, false},
      // nccl-tests prints the -o op in send/recv rows (and loops over ops with -o all); we do the same.
      {Coll::SendRecv, "sendrecv", "sendrecv_perf", true, false},
  };
  return colls;
}

const CollInfo& collInfo(Coll coll) {
  for (const CollInfo& c : allColls()) {
    if (c.coll == coll) return c;
  }
  throw std::logic_error("unknown collective");
}

bool parseColl(const std::string& name, Coll* coll) {
  for (const CollInfo& c : allColls()) {
    std::string nccl = c.ncclTestsName;
    std::string bare = nccl.substr(0, nccl.size() - 5);  // without "_perf"
    if (name == c.command || name == nccl || name == bare) {
      *coll = c.coll;
      return true;
    }
  }
  return false;
}

Counts collCounts(Coll coll, size_t count, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  Counts c;
  switch (coll) {
    case Coll::AllReduce:
    case Coll::Broadcast:
    case Coll::Reduce:
    case Coll::SendRecv:
      c.send = c.recv = c.param = count;
      break;
    case Coll::AllGather:
      c.send = count / n;
      c.recv = (count / n) * n;
      c.param = c.send;
      c.sendInplaceOffset = count / n;
      break;
    case Coll::ReduceScatter:
      c.send = (count / n) * n;
      c.recv = count / n;
      c.param = c.recv;
      c.recvInplaceOffset = count / n;
      break;
    case Coll::AllToAll:
      c.send = c.recv = (count / n) * n;
      c.param = count / n;
      break;
  }
  return c;
}

double algBytes(Coll coll, size_t paramCount, size_t eltSize, int nranks) {
  double bytes = static_cast<double>(paramCount) * static_cast<double>(eltSize);
  switch (coll) {
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll:
      return bytes * nranks;
    default:
      return bytes;
  }
}

double busFactor(Coll coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    case Coll::AllReduce:
      return 2.0 * (n - 1) / n;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

namespace {
struct TypeEntry {
  cfxDataType_t type;
  const char* name;
  size_t size;
};
const TypeEntry kTypes[] = {
    {cfxInt8, "int8", 1},     {cfxUint8, "uint8", 1},   {cfxInt32, "int32", 4},
    {cfxUint32, "uint32", 4}, {cfxInt64, "int64", 8},   {cfxUint64, "uint64", 8},
    {cfxFloat16, "half", 2},  {cfxFloat32, "float", 4}, {cfxFloat64, "double", 8},
    {cfxBfloat16, "bfloat16", 2},
};
struct Alias {
  const char* name;
  cfxDataType_t type;
};
const Alias kTypeAliases[] = {
    {"char", cfxInt8},        {"int", cfxInt32},      {"float16", cfxFloat16}, {"fp16", cfxFloat16},
    {"float32", cfxFloat32},  {"fp32", cfxFloat32},   {"float64", cfxFloat64}, {"fp64", cfxFloat64},
    {"bf16", cfxBfloat16},
};
const char* const kOpNames[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == cfxNumOps, "a name for every built-in op");
}  // namespace

const char* typeName(cfxDataType_t type) {
  for (const TypeEntry& t : kTypes) {
    if (t.type == type) return t.name;
  }
  return "?";
}

size_t typeSize(cfxDataType_t type) {
  for (const TypeEntry& t : kTypes) {
    if (t.type == type) return t.size;
  }
  return 0;
}

bool parseType(const std::string& name, cfxDataType_t* type) {
  for (const TypeEntry& t : kTypes) {
    if (name == t.name) {
      *type = t.type;
      return true;
    }
  }
  for (const Alias& a : kTypeAliases) {
    if (name == a.name) {
      *type = a.type;
      return true;
    }
  }
  return false;
}

const std::vector<cfxDataType_t>& allTypes() {
  static const std::vector<cfxDataType_t> types = [] {
    std::vector<cfxDataType_t> v;
    for (const TypeEntry& t : kTypes) v.push_back(t.type);
    return v;
  }();
  return types;
}

const char* opName(cfxRedOp_t op) {
  int i = static_cast<int>(op);
  return i >= 0 && i < cfxNumOps ? kOpNames[i] : "?";
}

bool parseOp(const std::string& name, cfxRedOp_t* op) {
  for (int i = 0; i < cfxNumOps; ++i) {
    if (name == kOpNames[i]) {
      *op = static_cast<cfxRedOp_t>(i);
      return true;
    }
  }
  return false;
}

const std::vector<cfxRedOp_t>& allOps() {
  static const std::vector<cfxRedOp_t> ops = {cfxSum, cfxProd, cfxMax, cfxMin, cfxAvg};
  return ops;
}

}  // namespace cfxperf
