// Helpers shared by the device-buffer path's files (device_call.cc, device_call_ipc.cc).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "algorithms/plan.h"
#include "core/error.h"
#include "src/communicator.h"

namespace conflux {

/// A CudaError status naming the operation and CUDA's error (which it clears).
Status cudaFailure(const std::string& what, cudaError_t e);

inline cudaStream_t streamOf(void* s) { return static_cast<cudaStream_t>(s); }

/// Byte sizes of a call's send and receive buffers on this rank.
BufferSizes sizesOf(const CallArgs& a, int rank, int nranks);

}  // namespace conflux
