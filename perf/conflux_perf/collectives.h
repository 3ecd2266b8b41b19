// conflux-perf: what each benchmarked collective is. Names (ours and nccl-tests'), the element counts
// that nccl-tests derives from a byte size, the bytes behind algbw and the bus-bandwidth factor, plus the
// datatype and reduction-op tables (nccl-tests' spellings). Pure functions, no I/O.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "conflux/conflux.h"

namespace cfxperf {

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, SendRecv };

struct CollInfo {
  Coll coll;
  const char* command;        ///< subcommand: "allreduce"
  const char* ncclTestsName;  ///< nccl-tests binary: "all_reduce_perf"
  bool hasOp;                 ///< the redop column shows the op (otherwise "none")
  bool hasRoot;               ///< the root column shows the root (otherwise -1)
};

/// Every collective, in the order of the usage text.
const std::vector<CollInfo>& allColls();
const CollInfo& collInfo(Coll coll);
/// Parses a subcommand ("allreduce", also nccl-tests' "all_reduce" / "all_reduce_perf").
bool parseColl(const std::string& name, Coll* coll);

/// Element counts of one call, as nccl-tests' getCollByteCount: from `count` = bytes / element size.
/// send/recv: elements each rank's buffers hold; param: the count argument of the call;
/// *InplaceOffset: where, in units of elements times the rank, the in-place buffers start.
struct Counts {
  size_t send = 0, recv = 0, param = 0, sendInplaceOffset = 0, recvInplaceOffset = 0;
};
Counts collCounts(Coll coll, size_t count, int nranks);

/// Bytes that algbw divides by the time (nccl-tests' getBw): param * eltSize, times nranks for
/// all-gather, reduce-scatter and all-to-all.
double algBytes(Coll coll, size_t paramCount, size_t eltSize, int nranks);
/// busbw = algbw * factor: 2(n-1)/n for all-reduce; (n-1)/n for all-gather, reduce-scatter, all-to-all;
/// 1 for broadcast, reduce, send/recv.
double busFactor(Coll coll, int nranks);

/// nccl-tests' datatype names: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16.
const char* typeName(cfxDataType_t type);
size_t typeSize(cfxDataType_t type);
/// Accepts nccl-tests' names and the aliases float16, float32, float64, char, int, fp16, fp32, fp64, bf16.
bool parseType(const std::string& name, cfxDataType_t* type);
/// All datatypes in nccl-tests' order (what `-d all` runs).
const std::vector<cfxDataType_t>& allTypes();

const char* opName(cfxRedOp_t op);  ///< sum prod max min avg
bool parseOp(const std::string& name, cfxRedOp_t* op);
const std::vector<cfxRedOp_t>& allOps();  ///< what `-o all` runs: sum prod max min avg

}  // namespace cfxperf
