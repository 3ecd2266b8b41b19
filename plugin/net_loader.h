// A caller's view of any ncclNet plugin library (ours or another): one interface over every ABI version,
// filled from the struct the dlopen'ed library exports (dlsym "ncclNetPlugin_vN") and driven only through
// its function pointers, the way NCCL's proxy drives it. Used by the conformance tests and by
// `conflux-perf net`. Header-only: it needs nothing but libdl.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "plugin/nccl_net_abi.h"

namespace conflux::plugin {

/// Every call returns the plugin's ncclResult_t as an int.
class NetApi {
 public:
  virtual ~NetApi() = default;
  int version = 0;
  const char* name = nullptr;
  int maxRequests() const { return version == 8 ? abi::kMaxRequestsV8 : abi::kMaxRequests; }

  virtual int init(abi::Logger logger) = 0;    ///< v11: also creates the context
  virtual int finalize() = 0;                  ///< v11 only; 0 elsewhere
  virtual int devices(int* n) = 0;
  virtual int properties(int dev, abi::PropertiesV11* p) = 0;  ///< fields the version lacks stay zero
  /// v9+: a virtual device of props->devs; v8 (no such member) and a NULL member return -1.
  virtual int makeVDevice(int* dev, abi::VProps* props) = 0;
  virtual int listen(int dev, void* handle, void** comm) = 0;
  virtual int connect(int dev, void* handle, void** comm) = 0;
  virtual int accept(void* listenComm, void** comm) = 0;
  virtual int regMr(void* comm, void* data, size_t size, int type, void** mh) = 0;
  virtual int deregMr(void* comm, void* mh) = 0;
  virtual int isend(void* comm, void* data, size_t size, int tag, void* mh, void** req) = 0;
  virtual int irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mh, void** req) = 0;
  virtual int iflush(void* comm, int n, void** data, int* sizes, void** mh, void** req) = 0;
  virtual int test(void* req, int* done, int* sizes) = 0;
  virtual int closeSend(void* comm) = 0;
  virtual int closeRecv(void* comm) = 0;
  virtual int closeListen(void* comm) = 0;
};

template <class Net, int V>
class NetApiOf final : public NetApi {
 public:
  explicit NetApiOf(const Net* net) : net_(net) {
    version = V;
    name = net->name;
  }
  int init(abi::Logger logger) override {
    if constexpr (V >= 11) {
      return net_->init(&ctx_, 1, &config_, logger, nullptr);
    } else if constexpr (V == 10) {
      return net_->init(logger, nullptr);
    } else {
      return net_->init(logger);
    }
  }
  int finalize() override {
    if constexpr (V >= 11) return net_->finalize(ctx_);
    return 0;
  }
  int devices(int* n) override { return net_->devices(n); }
  int properties(int dev, abi::PropertiesV11* p) override {
    std::memset(p, 0, sizeof *p);
    if constexpr (V == 8) {
      abi::PropertiesV8 p8{};
      const int rc = net_->getProperties(dev, &p8);
      p->name = p8.name, p->pciPath = p8.pciPath, p->guid = p8.guid, p->ptrSupport = p8.ptrSupport;
      p->speed = p8.speed, p->latency = p8.latency, p->maxComms = p8.maxComms, p->maxRecvs = p8.maxRecvs;
      p->netDeviceType = p8.netDeviceType;
      return rc;
    } else if constexpr (V < 11) {
      return net_->getProperties(dev, reinterpret_cast<abi::PropertiesV9*>(p));
    } else {
      return net_->getProperties(dev, p);
    }
  }
  int makeVDevice(int* dev, abi::VProps* props) override {
    if constexpr (V >= 9) {
      if (net_->makeVDevice != nullptr) return net_->makeVDevice(dev, props);
    }
    return -1;
  }
  int listen(int dev, void* handle, void** comm) override {
    if constexpr (V >= 11) return net_->listen(ctx_, dev, handle, comm);
    else return net_->listen(dev, handle, comm);
  }
  int connect(int dev, void* handle, void** comm) override {
    abi::DeviceHandle* devComm = nullptr;
    if constexpr (V >= 11) return net_->connect(ctx_, dev, handle, comm, &devComm);
    else if constexpr (V == 10) return net_->connect(dev, &config_, handle, comm, &devComm);
    else return net_->connect(dev, handle, comm, &devComm);
  }
  int accept(void* listenComm, void** comm) override {
    abi::DeviceHandle* devComm = nullptr;
    return net_->accept(listenComm, comm, &devComm);
  }
  int regMr(void* comm, void* data, size_t size, int type, void** mh) override {
    return net_->regMr(comm, data, size, type, mh);
  }
  int deregMr(void* comm, void* mh) override { return net_->deregMr(comm, mh); }
  int isend(void* comm, void* data, size_t size, int tag, void* mh, void** req) override {
    if constexpr (V == 8) return net_->isend(comm, data, int(size), tag, mh, req);
    else if constexpr (V == 9) return net_->isend(comm, data, size, tag, mh, req);
    else return net_->isend(comm, data, size, tag, mh, nullptr, req);
  }
  int irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mh, void** req) override {
    if constexpr (V == 8) {
      int s[8];
      for (int i = 0; i < n && i < 8; ++i) s[i] = int(sizes[i]);
      return net_->irecv(comm, n, data, s, tags, mh, req);
    } else if constexpr (V == 9) {
      return net_->irecv(comm, n, data, sizes, tags, mh, req);
    } else {
      void* ph[8] = {};
      return net_->irecv(comm, n, data, sizes, tags, mh, ph, req);
    }
  }
  int iflush(void* comm, int n, void** data, int* sizes, void** mh, void** req) override {
    return net_->iflush(comm, n, data, sizes, mh, req);
  }
  int test(void* req, int* done, int* sizes) override { return net_->test(req, done, sizes); }
  int closeSend(void* comm) override { return net_->closeSend(comm); }
  int closeRecv(void* comm) override { return net_->closeRecv(comm); }
  int closeListen(void* comm) override { return net_->closeListen(comm); }

 private:
  const Net* net_;
  void* ctx_ = nullptr;
  abi::CommConfig config_{abi::kTrafficClassUndef};
};

/// dlopen(path) and the exported struct of `version`; throws with dlerror() when either is missing.
inline std::unique_ptr<NetApi> loadNet(const char* path, int version) {
  void* lib = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
  const std::string symbol = "ncclNetPlugin_v" + std::to_string(version);
  void* sym = ::dlsym(lib, symbol.c_str());
  if (sym == nullptr) throw std::runtime_error("dlsym " + symbol + ": not exported");
  switch (version) {
    case 8: return std::make_unique<NetApiOf<abi::NetV8, 8>>(static_cast<abi::NetV8*>(sym));
    case 9: return std::make_unique<NetApiOf<abi::NetV9, 9>>(static_cast<abi::NetV9*>(sym));
    case 10: return std::make_unique<NetApiOf<abi::NetV10, 10>>(static_cast<abi::NetV10*>(sym));
    case 11: return std::make_unique<NetApiOf<abi::NetV11, 11>>(static_cast<abi::NetV11*>(sym));
    default: throw std::runtime_error("no such ABI version");
  }
}

}  // namespace conflux::plugin
