// The one implementation behind every exported ncclNet version: ABI-shaped entry points that convert
// exceptions to ncclResult_t in one place and log the reason through NCCL's logger. The per-version
// adapters (net_v8.cc .. net_v11.cc) only reshape arguments.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/nccl_net_abi.h"

namespace conflux::plugin::impl {

inline constexpr const char* kName = "Conflux";
/// Grouped receives per irecv (properties maxRecvs).
inline constexpr int kMaxRecvs = 8;

/// Process-wide setup: routes Conflux logging to `logger` (nothing goes to stderr) and discovers devices.
abi::Result init(abi::Logger logger);
/// A context for requests limits of `maxRequests` per comm (v11: one per NCCL communicator).
abi::Result createContext(int maxRequests, void** ctx);
abi::Result destroyContext(void* ctx);
/// The per-process context of an ABI version without contexts (v8..v10), created by its first init.
void* processContext(int abiVersion);

abi::Result devices(int* ndev);
/// Properties in the v11 layout; adapters copy out the fields their version has.
abi::Result getProperties(int dev, abi::PropertiesV11* props);

/// A virtual device grouping props->devs (see makeVirtualDevice in net_devices.h); *d is its index.
abi::Result makeVDevice(int* d, abi::VProps* props);

abi::Result listen(void* ctx, int dev, void* handle, void** listenComm);
abi::Result connect(void* ctx, int dev, void* handle, void** sendComm, abi::DeviceHandle** sendDevComm);
abi::Result accept(void* listenComm, void** recvComm, abi::DeviceHandle** recvDevComm);
abi::Result regMr(void* comm, void* data, size_t size, int type, void** mhandle);
abi::Result regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
abi::Result deregMr(void* comm, void* mhandle);
abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                  void** request);
abi::Result iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
abi::Result test(void* request, int* done, int* sizes);
abi::Result closeSend(void* sendComm);
abi::Result closeRecv(void* recvComm);
abi::Result closeListen(void* listenComm);

}  // namespace conflux::plugin::impl
