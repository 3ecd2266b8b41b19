#include "src/cuda_event.h"

#include <cuda_runtime_api.h>

#include "src/device_call_util.h"

namespace conflux {

CudaEvent& CudaEvent::operator=(CudaEvent&& o) noexcept {
  if (this != &o) {
    reset();
    ev_ = o.ev_;
    o.ev_ = nullptr;
  }
  return *this;
}

Status CudaEvent::create(CudaEvent& out) {
  cudaEvent_t ev = nullptr;
  if (cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); e != cudaSuccess) {
    return cudaFailure("cudaEventCreate", e);
  }
  out.reset();
  out.ev_ = ev;
  return Status::ok();
}

Status CudaEvent::record(CUstream_st* stream, const char* what) const {
  if (cudaError_t e = cudaEventRecord(ev_, stream); e != cudaSuccess) return cudaFailure(what, e);
  return Status::ok();
}

Status CudaEvent::synchronize(const char* what) const {
  if (cudaError_t e = cudaEventSynchronize(ev_); e != cudaSuccess) return cudaFailure(what, e);
  return Status::ok();
}

void CudaEvent::reset() {
  if (ev_ != nullptr) cudaEventDestroy(ev_);
  ev_ = nullptr;
}

}  // namespace conflux
