// ncclNetPlugin_v9 (NCCL 2.24-2.25): init with the logger only; no traffic class, no profiler handles.
#include <cstring>

#include "plugin/net_impl.h"

namespace conflux::plugin {
namespace {

void* context() { return impl::processContext(9); }

abi::Result getProperties(int dev, abi::PropertiesV9* props) {
  abi::PropertiesV11 p;
  const abi::Result rc = impl::getProperties(dev, &p);
  if (rc == abi::kSuccess && props != nullptr) std::memcpy(props, &p, sizeof *props);  // v9 is v11's prefix
  return rc;
}

abi::Result listen(int dev, void* handle, void** comm) { return impl::listen(context(), dev, handle, comm); }

abi::Result connect(int dev, void* handle, void** comm, abi::DeviceHandle** devComm) {
  return impl::connect(context(), dev, handle, comm, devComm);
}

abi::Result irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  return impl::irecv(comm, n, data, sizes, tags, mhandles, request);
}

}  // namespace
}  // namespace conflux::plugin

using namespace conflux::plugin;

// The exported symbol: a data object NCCL finds with dlsym.
extern "C" __attribute__((visibility("default"))) abi::NetV9 ncclNetPlugin_v9;
abi::NetV9 ncclNetPlugin_v9 = {
    .name = impl::kName,
    .init = impl::init,
    .devices = impl::devices,
    .getProperties = getProperties,
    .listen = listen,
    .connect = connect,
    .accept = impl::accept,
    .regMr = impl::regMr,
    .regMrDmaBuf = impl::regMrDmaBuf,
    .deregMr = impl::deregMr,
    .isend = impl::isend,
    .irecv = irecv,
    .iflush = impl::iflush,
    .test = impl::test,
    .closeSend = impl::closeSend,
    .closeRecv = impl::closeRecv,
    .closeListen = impl::closeListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = impl::makeVDevice,
};
