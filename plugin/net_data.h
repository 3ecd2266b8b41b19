// The plugin's data path: memory registration, isend, grouped irecv, test.
#pragma once

#include <cstddef>

#include "plugin/net_comm.h"

namespace conflux::plugin {

/// A registration handle (mhandle) of host memory on a comm's endpoint.
ofi::MemoryRegion* registerMemory(Comm& comm, void* data, size_t size);
void deregisterMemory(Comm& comm, ofi::MemoryRegion* region);

/// nullptr when the comm has no free request or the provider's queue is full (NCCL retries).
Request* isend(SendComm& comm, void* data, size_t size, int tag, ofi::MemoryRegion* mr);
/// n grouped receives (1..kMaxRecvs) with capacities sizes[i]; nullptr like isend.
Request* irecv(RecvComm& comm, int n, void** data, const size_t* sizes, const int* tags,
               ofi::MemoryRegion* const* mrs);
/// Progresses; when `r` finished sets *done = 1, sizes[i] = bytes received (sends: bytes sent) and frees it.
/// Throws Error when it failed (after freeing it).
void test(Request* r, int* done, int* sizes);

}  // namespace conflux::plugin
