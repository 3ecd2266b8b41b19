// How torch tensors and reduce ops become Conflux call arguments: datatype and op mapping (bool, complex
// and the data-movement-only types included), and the checks that raise a clear error naming the
// argument for anything Conflux cannot do, before any rank has started the call.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <memory>
#include <string>
#include <vector>

#include "comm_handle.h"
#include "conflux/conflux.h"

namespace conflux_torch {

/// A tensor as Conflux sees it: its bytes, element count and element type (complex numbers as pairs of
/// reals, bool as uint8, other types without a Conflux datatype as bytes when only moved).
struct Buffer {
  void* data = nullptr;
  size_t count = 0;
  cfxDataType_t type = cfxUint8;
};

/// The tensor's buffer for a collective that only moves data (any dtype: moved as its own type when
/// Conflux has it, else as bytes). Checks contiguity; `what` names the argument in errors.
Buffer movedBuffer(const at::Tensor& t, const char* what);

/// The tensor's buffer for a reduction with `op`: fails naming the dtype when Conflux cannot reduce it.
Buffer reducedBuffer(const at::Tensor& t, const c10d::ReduceOp& op, const char* what);

/// The Conflux op for `op` on `t`'s dtype (bool: SUM is MAX, PRODUCT is MIN). PREMUL_SUM yields a
/// handle made on the group's communicator from the supplement's double or one-element tensor factor;
/// it is released (cfxRedOpDestroy) when the last copy of the ConfluxOp goes, whatever path the call took.
struct ConfluxOp {
  cfxRedOp_t op = cfxSum;
  std::shared_ptr<void> handle;  ///< owns a PreMulSum handle (empty for the built-in ops)
  at::Tensor factor;             ///< a device-resident PreMulSum factor the call reads (kept with the op)
};
ConfluxOp toConfluxOp(const c10d::ReduceOp& op, const at::Tensor& t, const std::shared_ptr<CommHandle>& comm);

/// "sum", "premul_sum", ... for messages.
std::string reduceOpName(const c10d::ReduceOp& op);

/// Checks that every tensor in `ts` is on the same device as ts[0] with the same dtype, contiguous.
void checkSameKind(const std::vector<at::Tensor>& ts, const char* what);

}  // namespace conflux_torch
