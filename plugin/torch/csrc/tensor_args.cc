#include "tensor_args.h"

#include <c10/util/Exception.h>


namespace conflux_torch {
namespace {

/// Conflux's datatype for a torch dtype it can also reduce, or false.
bool reducibleType(at::ScalarType s, cfxDataType_t* out) {
  switch (s) {
    case at::kFloat: *out = cfxFloat32; return true;
    case at::kDouble: *out = cfxFloat64; return true;
    case at::kHalf: *out = cfxFloat16; return true;
    case at::kBFloat16: *out = cfxBfloat16; return true;
    case at::kChar: *out = cfxInt8; return true;
    case at::kByte: *out = cfxUint8; return true;
    case at::kInt: *out = cfxInt32; return true;
    case at::kLong: *out = cfxInt64; return true;
    case at::kUInt32: *out = cfxUint32; return true;
    case at::kUInt64: *out = cfxUint64; return true;
    case at::kBool: *out = cfxUint8; return true;  // one byte, 0 or 1
    case at::kComplexFloat: *out = cfxFloat32; return true;   // pairs of reals
    case at::kComplexDouble: *out = cfxFloat64; return true;
    case at::kComplexHalf: *out = cfxFloat16; return true;
    default: return false;
  }
}

/// "torch.int16", as Python spells the dtype.
std::string dtypeName(at::ScalarType s) { return "torch." + std::string(c10::getDtypeNames(s).first); }

bool isComplex(at::ScalarType s) {
  return s == at::kComplexFloat || s == at::kComplexDouble || s == at::kComplexHalf;
}

bool isFloating(at::ScalarType s) {
  return s == at::kFloat || s == at::kDouble || s == at::kHalf || s == at::kBFloat16 || isComplex(s);
}

Buffer bufferOf(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), "conflux: ", what, " is an undefined tensor");
  TORCH_CHECK(t.is_contiguous(t.suggest_memory_format()) && t.is_non_overlapping_and_dense(), "conflux: ", what,
              " must be a contiguous (dense) tensor");
  TORCH_CHECK(!t.is_sparse(), "conflux: ", what, " is sparse; conflux handles dense tensors only");
  TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(), "conflux: ", what, " is on device ", t.device(),
              "; conflux handles CPU and CUDA tensors");
  Buffer b;
  b.data = t.numel() == 0 ? nullptr : t.data_ptr();
  return b;
}

}  // namespace

Buffer movedBuffer(const at::Tensor& t, const char* what) {
  Buffer b = bufferOf(t, what);
  cfxDataType_t type;
  if (reducibleType(t.scalar_type(), &type)) {
    b.type = type;
    b.count = static_cast<size_t>(t.numel()) * (isComplex(t.scalar_type()) ? 2 : 1);
  } else {
    b.type = cfxUint8;  // int16, float8, ...: moved as bytes
    b.count = static_cast<size_t>(t.numel()) * t.element_size();
  }
  return b;
}

Buffer reducedBuffer(const at::Tensor& t, const c10d::ReduceOp& op, const char* what) {
  Buffer b = bufferOf(t, what);
  const at::ScalarType s = t.scalar_type();
  TORCH_CHECK(reducibleType(s, &b.type), "conflux: ", what, " has dtype ", dtypeName(s),
              ", which conflux cannot reduce (float32/64, float16, bfloat16, int8, uint8, int32, int64, uint32, "
              "uint64, bool, complex)");
  const auto kind = op.op_;
  if (isComplex(s)) {
    TORCH_CHECK(kind == c10d::ReduceOp::SUM || kind == c10d::ReduceOp::AVG || kind == c10d::ReduceOp::PREMUL_SUM,
                "conflux: ", reduceOpName(op), " is not defined on complex tensors (", what, " is ", dtypeName(s),
                "): use SUM, AVG or PREMUL_SUM");
  }
  if (kind == c10d::ReduceOp::BAND || kind == c10d::ReduceOp::BOR || kind == c10d::ReduceOp::BXOR) {
    TORCH_CHECK(!isFloating(s), "conflux: ", reduceOpName(op), " is defined on integer and bool tensors only (",
                what, " is ", dtypeName(s), ")");
  }
  if (s == at::kBool) {
    TORCH_CHECK(kind != c10d::ReduceOp::AVG && kind != c10d::ReduceOp::PREMUL_SUM, "conflux: ", reduceOpName(op),
                " is not defined on bool tensors (", what, ")");
  }
  b.count = static_cast<size_t>(t.numel()) * (isComplex(s) ? 2 : 1);
  return b;
}

std::string reduceOpName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "op " + std::to_string(static_cast<int>(op.op_));
  }
}

ConfluxOp toConfluxOp(const c10d::ReduceOp& op, const at::Tensor& t, const std::shared_ptr<CommHandle>& handle) {
  const bool isBool = t.scalar_type() == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return {isBool ? cfxMax : cfxSum, {}, {}};  // logical or
    case c10d::ReduceOp::PRODUCT: return {isBool ? cfxMin : cfxProd, {}, {}};  // logical and
    case c10d::ReduceOp::MIN: return {cfxMin, {}, {}};
    case c10d::ReduceOp::MAX: return {cfxMax, {}, {}};
    case c10d::ReduceOp::AVG: return {cfxAvg, {}, {}};
    case c10d::ReduceOp::BAND: return {cfxBand, {}, {}};
    case c10d::ReduceOp::BOR: return {cfxBor, {}, {}};
    case c10d::ReduceOp::BXOR: return {cfxBxor, {}, {}};
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* s = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(s != nullptr, "conflux: PREMUL_SUM without its factor (make it with "
                                "torch.distributed._make_nccl_premul_sum)");
      cfxDataType_t type;
      TORCH_CHECK(reducibleType(t.scalar_type(), &type), "conflux: PREMUL_SUM on dtype ", dtypeName(t.scalar_type()));
      // The factor in the tensor's (real) element type. For a CUDA tensor with a tensor factor, a device
      // copy that the kernels read in stream order (no host synchronisation); otherwise the value itself.
      const at::ScalarType real = at::toRealValueType(t.scalar_type());
      ConfluxOp out;
      cfxComm_t comm = handle->comm;
      cfxResult_t r;
      if (s->tensor_factor.defined()) {
        TORCH_CHECK(!s->tensor_factor.is_complex(), "conflux: PREMUL_SUM needs a real factor");
        if (t.device().is_cuda()) {
          out.factor = s->tensor_factor.reshape({1}).to(t.device(), real).contiguous();
          r = cfxRedOpCreatePreMulSum(&out.op, out.factor.data_ptr(), type, cfxScalarDevice, comm);
        } else {
          at::Tensor f = s->tensor_factor.reshape({1}).to(at::kCPU, real).contiguous();
          r = cfxRedOpCreatePreMulSum(&out.op, f.data_ptr(), type, cfxScalarHostImmediate, comm);
        }
      } else {
        at::Tensor f = at::full({1}, s->double_factor, at::TensorOptions().dtype(real));
        r = cfxRedOpCreatePreMulSum(&out.op, f.data_ptr(), type, cfxScalarHostImmediate, comm);
      }
      TORCH_CHECK(r == cfxSuccess, "conflux: ", cfxGetLastError(comm));
      out.handle = std::shared_ptr<void>(nullptr, [handle, op = out.op](void*) { handle->releaseOp(op); });
      return out;
    }
    default:
      TORCH_CHECK(false, "conflux: reduce op ", reduceOpName(op), " is not supported");
  }
}

void checkSameKind(const std::vector<at::Tensor>& ts, const char* what) {
  for (size_t i = 1; i < ts.size(); ++i) {
    TORCH_CHECK(ts[i].device() == ts[0].device(), "conflux: ", what, "[", i, "] is on ", ts[i].device(), " but ", what,
                "[0] on ", ts[0].device());
    TORCH_CHECK(ts[i].scalar_type() == ts[0].scalar_type(), "conflux: ", what, "[", i, "] has dtype ",
                dtypeName(ts[i].scalar_type()), " but ", what, "[0] ", dtypeName(ts[0].scalar_type()));
  }
}

}  // namespace conflux_torch
