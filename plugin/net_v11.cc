// ncclNetPlugin_v11 (NCCL 2.28-2.29): contexts per NCCL communicator (init/finalize), listen and connect
// take the context; properties carry maxMultiRequestSize.
#include "plugin/net_adapters.h"

namespace conflux::plugin {
namespace {

abi::Result init(void** ctx, uint64_t /*commId*/, abi::CommConfig* /*config*/, abi::Logger logger,
                 abi::ProfilerCallback /*profiler*/) {
  const abi::Result rc = impl::init(logger);
  return rc != abi::kSuccess ? rc : impl::createContext(abi::kMaxRequests, ctx);
}

}  // namespace
}  // namespace conflux::plugin

using namespace conflux::plugin;

// The exported symbol: a data object NCCL finds with dlsym.
extern "C" __attribute__((visibility("default"))) abi::NetV11 ncclNetPlugin_v11;
abi::NetV11 ncclNetPlugin_v11 = {
    .name = impl::kName,
    .init = init,
    .devices = impl::devices,
    .getProperties = impl::getProperties,
    .listen = impl::listen,
    .connect = impl::connect,
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
    .finalize = impl::destroyContext,
    .setNetAttr = nullptr,
};
