// An owned CUDA event, for the device-buffer path (device_call.h). Declared without the CUDA headers, so
// that headers holding one need not include them; defined in cuda_event.cc (CUDA builds only).
#pragma once

#include "core/error.h"

struct CUevent_st;  // cudaEvent_t without the CUDA headers
struct CUstream_st;

namespace conflux {

/// A cudaEvent_t made with cudaEventDisableTiming (only ordering and completion are asked of it), destroyed
/// with its owner. Empty until create(); movable, not copyable.
class CudaEvent {
 public:
  CudaEvent() = default;
  CudaEvent(CudaEvent&& o) noexcept : ev_(o.ev_) { o.ev_ = nullptr; }
  CudaEvent& operator=(CudaEvent&& o) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  ~CudaEvent() { reset(); }

  /// A new event; CudaError naming cudaEventCreate when CUDA refuses.
  static Status create(CudaEvent& out);
  /// Records the event on `stream` (cudaEventRecord); CudaError naming `what` on failure.
  Status record(CUstream_st* stream, const char* what) const;
  /// Waits on the host until the work recorded before it finished (cudaEventSynchronize).
  Status synchronize(const char* what) const;
  bool valid() const { return ev_ != nullptr; }
  CUevent_st* get() const { return ev_; }
  /// Destroys the event (if any).
  void reset();

 private:
  CUevent_st* ev_ = nullptr;
};

}  // namespace conflux
