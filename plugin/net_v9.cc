// ncclNetPlugin_v9 (NCCL 2.24-2.25): init with the logger only; no traffic class, no profiler handles.
#include "plugin/net_adapters.h"

namespace conflux::plugin {
namespace {

// v9's irecv passes its arrays without const.
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
    .getProperties = adapt::getPropertiesV9,
    .listen = adapt::listen<9>,
    .connect = adapt::connect<9>,
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
