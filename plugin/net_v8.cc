// ncclNetPlugin_v8 (NCCL 2.20-2.23): int message sizes, the short properties layout, 8 requests per comm,
// no virtual devices.
#include "plugin/net_adapters.h"

namespace conflux::plugin {
namespace {

abi::Result getProperties(int dev, abi::PropertiesV8* props) {
  abi::PropertiesV11 p;
  const abi::Result rc = impl::getProperties(dev, &p);
  if (rc != abi::kSuccess || props == nullptr) return rc;
  props->name = p.name;
  props->pciPath = p.pciPath;
  props->guid = p.guid;
  props->ptrSupport = p.ptrSupport;
  props->regIsGlobal = p.regIsGlobal;
  props->speed = p.speed;
  props->port = p.port;
  props->latency = p.latency;
  props->maxComms = p.maxComms;
  props->maxRecvs = p.maxRecvs;
  props->netDeviceType = p.netDeviceType;
  props->netDeviceVersion = p.netDeviceVersion;
  return rc;
}

abi::Result isend(void* comm, void* data, int size, int tag, void* mhandle, void** request) {
  if (size < 0) return abi::kInvalidArgument;
  return impl::isend(comm, data, size_t(size), tag, mhandle, request);
}

abi::Result irecv(void* comm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) {
  if (n < 0 || n > impl::kMaxRecvs || sizes == nullptr) return abi::kInvalidArgument;
  size_t capacities[impl::kMaxRecvs];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) return abi::kInvalidArgument;
    capacities[i] = size_t(sizes[i]);
  }
  return impl::irecv(comm, n, data, capacities, tags, mhandles, request);
}

}  // namespace
}  // namespace conflux::plugin

using namespace conflux::plugin;

// The exported symbol: a data object NCCL finds with dlsym.
extern "C" __attribute__((visibility("default"))) abi::NetV8 ncclNetPlugin_v8;
abi::NetV8 ncclNetPlugin_v8 = {
    .name = impl::kName,
    .init = impl::init,
    .devices = impl::devices,
    .getProperties = getProperties,
    .listen = adapt::listen<8>,
    .connect = adapt::connect<8>,
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
};
