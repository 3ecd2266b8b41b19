// ncclNetPlugin_v10 (NCCL 2.26-2.27): init once per process with a profiler callback; connect takes the
// communicator's traffic class; one per-process context.
#include <cstring>

#include "plugin/net_impl.h"

namespace conflux::plugin {
namespace {

void* context() { return impl::processContext(10); }

abi::Result init(abi::Logger logger, abi::ProfilerCallback /*profiler*/) { return impl::init(logger); }

abi::Result getProperties(int dev, abi::PropertiesV9* props) {
  abi::PropertiesV11 p;
  const abi::Result rc = impl::getProperties(dev, &p);
  if (rc == abi::kSuccess && props != nullptr) std::memcpy(props, &p, sizeof *props);  // v9 is v11's prefix
  return rc;
}

abi::Result listen(int dev, void* handle, void** comm) { return impl::listen(context(), dev, handle, comm); }

abi::Result connect(int dev, abi::CommConfig* /*config*/, void* handle, void** comm, abi::DeviceHandle** devComm) {
  return impl::connect(context(), dev, handle, comm, devComm);
}

abi::Result isend(void* comm, void* data, size_t size, int tag, void* mhandle, void* /*phandle*/, void** request) {
  return impl::isend(comm, data, size, tag, mhandle, request);
}

abi::Result irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** /*phandles*/,
                  void** request) {
  return impl::irecv(comm, n, data, sizes, tags, mhandles, request);
}

}  // namespace
}  // namespace conflux::plugin

using namespace conflux::plugin;

// The exported symbol: a data object NCCL finds with dlsym.
extern "C" __attribute__((visibility("default"))) abi::NetV10 ncclNetPlugin_v10;
abi::NetV10 ncclNetPlugin_v10 = {
    .name = impl::kName,
    .init = init,
    .devices = impl::devices,
    .getProperties = getProperties,
    .listen = listen,
    .connect = connect,
    .accept = impl::accept,
    .regMr = impl::regMr,
    .regMrDmaBuf = impl::regMrDmaBuf,
    .deregMr = impl::deregMr,
    .isend = isend,
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
