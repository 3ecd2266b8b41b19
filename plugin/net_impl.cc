#include "plugin/net_impl.h"

#include <strings.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

#include "algorithms/cost_model.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "plugin/net_advice.h"
#include "plugin/net_comm.h"
#include "plugin/net_data.h"
#include "plugin/net_devices.h"
#include "plugin/net_metrics.h"

namespace conflux::plugin::impl {

static_assert(impl::kMaxRecvs == plugin::kMaxRecvs);

namespace {

std::atomic<abi::Logger> ncclLogger{nullptr};

void toNcclLogger(log::Level level, uint32_t subsys, const char* message) {
  abi::Logger logger = ncclLogger.load();
  if (logger == nullptr) return;
  int ncclLevel = abi::kLogInfo;
  switch (level) {
    case log::Level::Version: ncclLevel = abi::kLogVersion; break;
    case log::Level::Warn: ncclLevel = abi::kLogWarn; break;
    case log::Level::Trace: ncclLevel = abi::kLogTrace; break;
    default: break;
  }
  const unsigned long flags = subsys == log::kInit ? abi::kLogSubsysInit : abi::kLogSubsysNet;
  logger(ncclLevel, flags, "conflux", 0, "%s", message);
}

/// CONFLUX_DEBUG when set, else the level NCCL_DEBUG asks of NCCL (read, never written).
void chooseLogLevel() {
  const char* own = std::getenv("CONFLUX_DEBUG");
  if (own != nullptr && *own != '\0') return;
  const char* nccl = std::getenv("NCCL_DEBUG");
  log::Level level = log::Level::Warn;
  if (nccl != nullptr) {
    if (strcasecmp(nccl, "INFO") == 0) level = log::Level::Info;
    if (strcasecmp(nccl, "TRACE") == 0) level = log::Level::Trace;
    if (strcasecmp(nccl, "VERSION") == 0) level = log::Level::Version;
    if (strcasecmp(nccl, "NONE") == 0) level = log::Level::None;
  }
  log::setLevel(level);
}

abi::Result toResult(Code code) {
  const int value = static_cast<int>(code);
  if (value >= abi::kSuccess && value <= abi::kInProgress) return static_cast<abi::Result>(value);
  return code == Code::Timeout ? abi::kRemoteError : abi::kInternalError;
}

/// Runs `body`, converting every exception into a result code and a warning naming the call.
template <class F>
abi::Result guard(const char* call, F&& body) {
  try {
    body();
    return abi::kSuccess;
  } catch (const Error& e) {
    CFX_WARN(kNet, "plugin: %s: %s", call, e.what());
    return toResult(e.code());
  } catch (const std::bad_alloc&) {
    CFX_WARN(kNet, "plugin: %s: out of memory", call);
    return abi::kSystemError;
  } catch (const std::exception& e) {
    CFX_WARN(kNet, "plugin: %s: %s", call, e.what());
    return abi::kInternalError;
  } catch (...) {
    CFX_WARN(kNet, "plugin: %s: unknown exception", call);
    return abi::kInternalError;
  }
}

template <class T, class P>
T* as(P* p, const char* what) {
  if (p == nullptr) throw Error(Code::InvalidArgument, std::string("plugin: null ") + what);
  return static_cast<T*>(p);
}

Comm& asComm(void* p) { return *as<Comm>(p, "comm"); }

/// The network latency measured on this cluster and written to CONFLUX_COST_FILE (inter_alpha_us, the
/// cost model's per-message time between nodes; the tuner reads the same file), or 0, NCCL's "unknown",
/// when no file gives it. Read once per process.
float measuredLatencyUs() {
  static const float value = [] {
    const std::string file = config::getString(config::Var::COST_FILE);
    if (file.empty()) return 0.0f;
    CostParams params;
    params.inter.alpha = -1;  // tells "not in the file" from a value
    try {
      loadCostFile(file, params);
    } catch (const std::exception& e) {
      CFX_WARN(kNet, "plugin: %s; device latency reported as unknown (0)", e.what());
      return 0.0f;
    }
    return params.inter.alpha < 0 ? 0.0f : float(params.inter.alpha * 1e6);
  }();
  return value;
}

}  // namespace

abi::Result init(abi::Logger logger) {
  return guard("init", [&] {
    if (logger != nullptr) ncclLogger.store(logger);
    log::setSink(&toNcclLogger);  // with no logger, messages are dropped rather than printed
    static std::once_flag once;
    std::call_once(once, chooseLogLevel);
    if (plugin::devices().empty()) throw Error(Code::SystemError, "plugin: no network device");
    printAdviceIfAsked();
    startNetMetrics();
  });
}

abi::Result createContext(int maxRequests, void** ctx) {
  return guard("init", [&] { *as<void*>(ctx, "context pointer") = new Context(maxRequests); });
}

abi::Result destroyContext(void* ctx) {
  return guard("finalize", [&] { delete as<Context>(ctx, "context"); });
}

void* processContext(int abiVersion) {
  static Context* contexts[3] = {new Context(abi::kMaxRequestsV8), new Context(abi::kMaxRequests),
                                 new Context(abi::kMaxRequests)};  // v8, v9, v10; kept until exit
  return contexts[abiVersion == 8 ? 0 : abiVersion == 9 ? 1 : 2];
}

abi::Result devices(int* ndev) {
  // Virtual devices count too: NCCL reads devices() again after makeVDevice and takes the new ones.
  return guard("devices", [&] { *as<int>(ndev, "ndev") = int(plugin::devices().size()) + virtualDeviceCount(); });
}

abi::Result getProperties(int dev, abi::PropertiesV11* props) {
  return guard("getProperties", [&] {
    const Device& d = describedDevice(dev);
    const std::vector<int> members = membersOf(dev);
    abi::PropertiesV11& p = *as<abi::PropertiesV11>(props, "properties");
    std::memset(&p, 0, sizeof p);
    p.name = const_cast<char*>(d.name.c_str());
    p.pciPath = d.pciPath.empty() ? nullptr : const_cast<char*>(d.pciPath.c_str());
    p.guid = d.guid;
    p.ptrSupport = abi::kPtrHost;  // no FI_HMEM in this transport yet
    p.regIsGlobal = 0;
    p.forceFlush = 0;
    p.speed = d.speedMbps;
    p.port = 0;
    p.latency = measuredLatencyUs();
    p.maxComms = 1 << 20;
    p.maxRecvs = kMaxRecvs;
    p.netDeviceType = abi::kDeviceHost;
    p.netDeviceVersion = 0;
    p.vProps.ndevs = int(members.size());
    for (size_t i = 0; i < members.size(); ++i) p.vProps.devs[i] = members[i];
    p.maxP2pBytes = d.maxMessageBytes;
    p.maxCollBytes = d.maxMessageBytes;
    p.maxMultiRequestSize = 1;
  });
}

abi::Result makeVDevice(int* d, abi::VProps* props) {
  return guard("makeVDevice", [&] {
    const abi::VProps& v = *as<abi::VProps>(props, "vProps");
    *as<int>(d, "device pointer") = makeVirtualDevice(v.devs, v.ndevs);
  });
}

abi::Result listen(void* ctx, int dev, void* handle, void** listenComm) {
  return guard("listen", [&] {
    as<void>(handle, "handle");
    *as<void*>(listenComm, "listenComm pointer") = plugin::listen(*as<Context>(ctx, "context"), dev, handle);
  });
}

abi::Result connect(void* ctx, int dev, void* handle, void** sendComm, abi::DeviceHandle** sendDevComm) {
  return guard("connect", [&] {
    *as<void*>(sendComm, "sendComm pointer") = nullptr;
    if (sendDevComm != nullptr) *sendDevComm = nullptr;
    *sendComm = plugin::connect(*as<Context>(ctx, "context"), dev, as<void>(handle, "handle"));
  });
}

abi::Result accept(void* listenComm, void** recvComm, abi::DeviceHandle** recvDevComm) {
  return guard("accept", [&] {
    *as<void*>(recvComm, "recvComm pointer") = nullptr;
    if (recvDevComm != nullptr) *recvDevComm = nullptr;
    *recvComm = plugin::accept(*as<ListenComm>(listenComm, "listenComm"));
  });
}

abi::Result regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return guard("regMr", [&] {
    if (type != abi::kPtrHost) {
      throw Error(Code::InvalidArgument, "plugin: regMr of memory type " + std::to_string(type) +
                                             " (only host memory is supported)");
    }
    *as<void*>(mhandle, "mhandle pointer") = registerMemory(asComm(comm), data, size);
  });
}

abi::Result regMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) {
  return guard("regMrDmaBuf", [] {
    throw Error(Code::InvalidUsage, "plugin: DMA-BUF registration is not supported (ptrSupport is host only)");
  });
}

abi::Result deregMr(void* comm, void* mhandle) {
  return guard("deregMr", [&] { deregisterMemory(asComm(comm), static_cast<Registration*>(mhandle)); });
}

abi::Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return guard("isend", [&] {
    *as<void*>(request, "request pointer") =
        plugin::isend(*as<SendComm>(sendComm, "sendComm"), data, size, tag, static_cast<Registration*>(mhandle));
  });
}

abi::Result irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                  void** request) {
  return guard("irecv", [&] {
    *as<void*>(request, "request pointer") =
        plugin::irecv(*as<RecvComm>(recvComm, "recvComm"), n, as<void*>(data, "data"), as<const size_t>(sizes, "sizes"),
                      as<const int>(tags, "tags"), reinterpret_cast<const Registration* const*>(mhandles));
  });
}

abi::Result iflush(void*, int, void**, int*, void**, void** request) {
  // Host memory only: received bytes are visible as soon as the receive completes.
  return guard("iflush", [&] { *as<void*>(request, "request pointer") = nullptr; });
}

abi::Result test(void* request, int* done, int* sizes) {
  return guard("test", [&] { plugin::test(static_cast<Request*>(request), as<int>(done, "done"), sizes); });
}

abi::Result closeSend(void* sendComm) {
  return guard("closeSend", [&] { plugin::closeSend(static_cast<SendComm*>(sendComm)); });
}

abi::Result closeRecv(void* recvComm) {
  return guard("closeRecv", [&] { plugin::closeRecv(static_cast<RecvComm*>(recvComm)); });
}

abi::Result closeListen(void* listenComm) {
  return guard("closeListen", [&] { plugin::closeListen(static_cast<ListenComm*>(listenComm)); });
}

}  // namespace conflux::plugin::impl
