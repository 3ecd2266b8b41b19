// Internal C++ mirrors of the public enums, plus element sizes and names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace conflux {

/// Element type; values equal cfxDataType_t.
enum class DataType : int {
  Int8 = 0, Uint8 = 1, Int32 = 2, Uint32 = 3, Int64 = 4, Uint64 = 5,
  Float16 = 6, Float32 = 7, Float64 = 8, Bfloat16 = 9,
};
inline constexpr int kNumDataTypes = 10;

/// Reduction operation; values 0..7 equal the built-in cfxRedOp_t values. PreMulSum is internal: the C API
/// hands out per-communicator handles for it (cfxRedOpCreatePreMulSum) and passes the scalar beside the op.
enum class RedOp : int {
  Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4, Band = 5, Bor = 6, Bxor = 7,
  PreMulSum = 8,  ///< sum over ranks of (rank's scalar x rank's input)
};
/// Built-in ops a caller names directly (cfxNumOps).
inline constexpr int kNumRedOps = 8;

/// Where a buffer lives. Every buffer the data path touches carries one.
enum class MemSpace : uint8_t { Host = 0, Cuda = 1 };

/// The collectives (and point-to-point batches) a plan can implement.
enum class Collective : uint8_t {
  AllReduce, Reduce, Broadcast, AllGather, ReduceScatter, AllToAll, SendRecv,
};
inline constexpr int kNumCollectives = 7;

constexpr size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::Int8: case DataType::Uint8: return 1;
    case DataType::Float16: case DataType::Bfloat16: return 2;
    case DataType::Int32: case DataType::Uint32: case DataType::Float32: return 4;
    case DataType::Int64: case DataType::Uint64: case DataType::Float64: return 8;
  }
  return 0;
}

constexpr bool isValidDataType(int t) { return t >= 0 && t < kNumDataTypes; }
/// A built-in op value as the C API accepts it (0..kNumRedOps-1).
constexpr bool isValidRedOp(int op) { return op >= 0 && op < kNumRedOps; }
/// Any op a kernel accepts: the built-in ones and PreMulSum.
constexpr bool isKernelRedOp(int op) { return op >= 0 && op <= static_cast<int>(RedOp::PreMulSum); }

constexpr bool isBitwise(RedOp op) { return op == RedOp::Band || op == RedOp::Bor || op == RedOp::Bxor; }
constexpr bool isFloatType(DataType t) {
  return t == DataType::Float16 || t == DataType::Float32 || t == DataType::Float64 || t == DataType::Bfloat16;
}
/// Whether `op` is defined on `type`: the bitwise ops only on integer types.
constexpr bool opAppliesTo(RedOp op, DataType type) { return !isBitwise(op) || !isFloatType(type); }

std::string_view dataTypeName(DataType t);   ///< "float32", "bfloat16", ...
std::string_view redOpName(RedOp op);        ///< "sum", "prod", "max", "min", "avg", "band", "bor", "bxor", "premulsum"
std::string_view collectiveName(Collective c);  ///< "allreduce", ...

}  // namespace conflux
