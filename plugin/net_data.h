// The plugin's data path: memory registration, isend, grouped irecv, test (striping: net_data.cc).
#pragma once

#include <cstddef>

#include "plugin/net_comm.h"

namespace conflux::plugin {

/// A registration handle (mhandle) of host memory on every rail of a comm.
Registration* registerMemory(Comm& comm, void* data, size_t size);
void deregisterMemory(Comm& comm, Registration* reg);

/// nullptr when the comm has no free request or the provider's queue is full (NCCL retries). Striped
/// over the comm's rails from CONFLUX_PLUGIN_STRIPE_BYTES on (net_data.cc).
Request* isend(SendComm& comm, void* data, size_t size, int tag, const Registration* reg);
/// n grouped receives (1..kMaxRecvs) with capacities sizes[i]; nullptr like isend.
Request* irecv(RecvComm& comm, int n, void** data, const size_t* sizes, const int* tags,
               const Registration* const* regs);
/// Progresses; when `r` finished sets *done = 1, sizes[i] = bytes received (sends: bytes sent) and frees it.
/// Throws Error when it failed (after freeing it).
void test(Request* r, int* done, int* sizes);

}  // namespace conflux::plugin
