// Adapter functions that more than one exported ncclNet version shares (the versions' own files keep
// only what is theirs). Each reshapes arguments for the one implementation in net_impl.h.
#pragma once

#include <cstring>

#include "plugin/net_impl.h"

namespace conflux::plugin::adapt {

/// v8..v10 have no contexts: one per process and ABI version (impl::processContext).
template <int V>
abi::Result listen(int dev, void* handle, void** comm) {
  return impl::listen(impl::processContext(V), dev, handle, comm);
}

/// v8 and v9 connect (v10 adds a traffic class, v11 a context).
template <int V>
abi::Result connect(int dev, void* handle, void** comm, abi::DeviceHandle** devComm) {
  return impl::connect(impl::processContext(V), dev, handle, comm, devComm);
}

/// v9 and v10 properties: a prefix of the v11 layout.
inline abi::Result getPropertiesV9(int dev, abi::PropertiesV9* props) {
  abi::PropertiesV11 p;
  const abi::Result rc = impl::getProperties(dev, &p);
  if (rc == abi::kSuccess && props != nullptr) std::memcpy(props, &p, sizeof *props);
  return rc;
}

/// v10 and v11 data calls: the profiler handles are not used.
inline abi::Result isendWithProfiler(void* comm, void* data, size_t size, int tag, void* mhandle, void* /*phandle*/,
                                     void** request) {
  return impl::isend(comm, data, size, tag, mhandle, request);
}
inline abi::Result irecvWithProfiler(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                                     void** /*phandles*/, void** request) {
  return impl::irecv(comm, n, data, sizes, tags, mhandles, request);
}

}  // namespace conflux::plugin::adapt
