// Where a buffer lives: host memory or a CUDA device's memory. Every collective asks for each of its
// buffers, so device buffers take the CUDA path without any API change.
#pragma once

#include <cstddef>

#include "core/types.h"

namespace conflux {

struct BufferPlace {
  MemSpace space = MemSpace::Host;
  int device = -1;  ///< CUDA device ordinal for MemSpace::Cuda
};

/// The memory space of @p ptr. Host memory (pinned or not, and managed memory, which the host can
/// touch) is MemSpace::Host. In builds without CUDA, and on machines without a CUDA driver or device,
/// everything is host memory; that answer is found once per process and then costs nothing.
BufferPlace placeOf(const void* ptr);

/// Copies @p bytes (at most 8) from @p src, host or device memory, into @p dst (host): how a PreMulSum
/// scalar of residence cfxScalarDevice is read on the host path. False when a device copy failed.
bool readSmallValue(void* dst, const void* src, size_t bytes);

/// Whether this build has the CUDA path (CONFLUX_WITH_CUDA) and this machine a usable CUDA device.
bool cudaUsable();

}  // namespace conflux
