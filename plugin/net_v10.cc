// ncclNetPlugin_v10 (NCCL 2.26-2.27): init once per process with a profiler callback; connect takes the
// communicator's traffic class; one per-process context.
#include "plugin/net_adapters.h"

namespace conflux::plugin {
namespace {

abi::Result init(abi::Logger logger, abi::ProfilerCallback /*profiler*/) { return impl::init(logger); }

abi::Result connect(int dev, abi::CommConfig* /*config*/, void* handle, void** comm, abi::DeviceHandle** devComm) {
  return impl::connect(impl::processContext(10), dev, handle, comm, devComm);
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
    .getProperties = adapt::getPropertiesV9,
    .listen = adapt::listen<10>,
    .connect = connect,
    .accept = impl::accept,
    .regMr = impl::regMr,
    .regMrDmaBuf = impl::regMrDmaBuf,
    .deregMr = impl::deregMr,
    .isend = adapt::isendWithProfiler,
    .irecv = adapt::irecvWithProfiler,
    .iflush = impl::iflush,
    .test = impl::test,
    .closeSend = impl::closeSend,
    .closeRecv = impl::closeRecv,
    .closeListen = impl::closeListen,
    .getDeviceMr = nullptr,
    .irecvConsumed = nullptr,
    .makeVDevice = impl::makeVDevice,
};
