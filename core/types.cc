#include "core/types.h"

namespace conflux {

std::string_view dataTypeName(DataType t) {
  switch (t) {
    case DataType::Int8: return "int8";
    case DataType::Uint8: return "uint8";
    case DataType::Int32: return "int32";
    case DataType::Uint32: return "uint32";
    case DataType::Int64: return "int64";
    case DataType::Uint64: return "uint64";
    case DataType::Float16: return "float16";
    case DataType::Float32: return "float32";
    case DataType::Float64: return "float64";
    case DataType::Bfloat16: return "bfloat16";
  }
  return "unknown";
}

std::string_view redOpName(RedOp op) {
  switch (op) {
    case RedOp::Sum: return "sum";
    case RedOp::Prod: return "prod";
    case RedOp::Max: return "max";
    case RedOp::Min: return "min";
    case RedOp::Avg: return "avg";
    case RedOp::Band: return "band";
    case RedOp::Bor: return "bor";
    case RedOp::Bxor: return "bxor";
    case RedOp::PreMulSum: return "premulsum";
  }
  return "unknown";
}

std::string_view collectiveName(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "allreduce";
    case Collective::Reduce: return "reduce";
    case Collective::Broadcast: return "broadcast";
    case Collective::AllGather: return "allgather";
    case Collective::ReduceScatter: return "reducescatter";
    case Collective::AllToAll: return "alltoall";
    case Collective::SendRecv: return "sendrecv";
  }
  return "unknown";
}

}  // namespace conflux
