// Our own declarations of the binary interface NCCL (2.20 and newer) expects from a network plugin:
// result codes, logger, device handle, properties (v8, v9/v10, v11 layouts) and the ncclNet_vN structs
// of function pointers (v8..v11). Written from the ABI facts in the project's reference sheet; nothing
// here is NCCL's code. Plain C layout only: these structs cross the dlopen boundary.
#pragma once

#include <cstddef>
#include <cstdint>

namespace conflux::plugin::abi {

/// ncclResult_t values.
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};

inline constexpr int kHandleBytes = 128;      ///< listen handle exchanged between ranks
inline constexpr int kPtrHost = 0x1;          ///< ptrSupport / regMr type bits
inline constexpr int kPtrCuda = 0x2;
inline constexpr int kPtrDmabuf = 0x4;
inline constexpr int kMaxRequests = 32;       ///< outstanding requests per comm (v9 and newer)
inline constexpr int kMaxRequestsV8 = 8;
inline constexpr int kMaxVDevs = 4;           ///< physical devices per virtual NIC
inline constexpr int kDeviceHost = 0;         ///< netDeviceType
inline constexpr int kDeviceUnpack = 1;
inline constexpr int kTrafficClassUndef = -1;
inline constexpr size_t kMaxNetSizeBytes = size_t{1} << 40;  ///< largest transfer NCCL accepts in properties

/// Logger levels and subsystem bits.
enum LogLevel : int { kLogNone = 0, kLogVersion = 1, kLogWarn = 2, kLogInfo = 3, kLogAbort = 4, kLogTrace = 5 };
inline constexpr unsigned long kLogSubsysInit = 0x1;
inline constexpr unsigned long kLogSubsysNet = 0x10;

extern "C" {

using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
using ProfilerCallback = Result (*)(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData);

/// Device handle (v7..v11); NULL for host-only devices.
struct DeviceHandle {
  int netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
};

struct VProps {
  int ndevs;
  int devs[kMaxVDevs];
};

struct PropertiesV8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int speed;       ///< Mbps
  int port;
  float latency;   ///< us
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
};

/// v9 and v10.
struct PropertiesV9 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VProps vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
};

struct PropertiesV11 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  VProps vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
};

/// Per-communicator configuration passed to connect (v10) and init (v11).
struct CommConfig {
  int trafficClass;
};

struct NetAttr {
  struct Peers {
    int32_t maxConcurrentPeers;
    int32_t minConcurrentPeers;
    int32_t maxFlowsPerPeer;
    int32_t minFlowsPerPeer;
  };
  Peers send;
  Peers recv;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
};

struct NetV8 {
  const char* name;
  Result (*init)(Logger logger);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV8* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
};

struct NetV9 {
  const char* name;
  Result (*init)(Logger logger);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV9* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, VProps* props);
};

struct NetV10 {
  const char* name;
  Result (*init)(Logger logger, ProfilerCallback profiler);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV9* props);
  Result (*listen)(int dev, void* handle, void** listenComm);
  Result (*connect)(int dev, CommConfig* config, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                  void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, VProps* props);
};

struct NetV11 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, CommConfig* config, Logger logger, ProfilerCallback profiler);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, PropertiesV11* props);
  Result (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  Result (*connect)(void* ctx, int dev, void* handle, void** sendComm, DeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, DeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                  void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, VProps* props);
  Result (*finalize)(void* ctx);
  Result (*setNetAttr)(void* ctx, NetAttr* attr);
};

}  // extern "C"

// Layout checks (LP64): a mismatch here would corrupt NCCL's view of every field after it.
static_assert(sizeof(DeviceHandle) == 32 && offsetof(DeviceHandle, needsProxyProgress) == 24);
static_assert(offsetof(PropertiesV8, guid) == 16 && offsetof(PropertiesV8, speed) == 32 &&
              offsetof(PropertiesV8, latency) == 40 && offsetof(PropertiesV8, netDeviceVersion) == 56 &&
              sizeof(PropertiesV8) == 64);
static_assert(offsetof(PropertiesV9, forceFlush) == 32 && offsetof(PropertiesV9, latency) == 44 &&
              offsetof(PropertiesV9, vProps) == 64 && offsetof(PropertiesV9, maxP2pBytes) == 88 &&
              offsetof(PropertiesV9, maxCollBytes) == 96 && sizeof(PropertiesV9) == 104);
static_assert(offsetof(PropertiesV11, maxMultiRequestSize) == 104 && sizeof(PropertiesV11) == 112);
static_assert(sizeof(NetAttr) == 44);
static_assert(sizeof(NetV8) == 19 * sizeof(void*) && sizeof(NetV9) == 20 * sizeof(void*) &&
              sizeof(NetV10) == 20 * sizeof(void*) && sizeof(NetV11) == 22 * sizeof(void*));
static_assert(offsetof(NetV11, finalize) == 20 * sizeof(void*) && offsetof(NetV9, makeVDevice) == 19 * sizeof(void*));

}  // namespace conflux::plugin::abi
