// conflux-perf net: an ncclNet plugin through its exported ABI (plugin/net_loader.h).
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "net_target.h"
#include "plugin/net_loader.h"

namespace cfxperf {
namespace {

namespace abi = conflux::plugin::abi;
using conflux::plugin::NetApi;

constexpr auto kConnectTimeout = std::chrono::seconds(60);

// The logger NCCL would pass: warnings reach stderr, the rest is dropped (as with NCCL_DEBUG=WARN).
void logToStderr(int level, unsigned long, const char* file, int line, const char* fmt, ...) {
  if (level != abi::kLogWarn && level != abi::kLogAbort) return;
  char text[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof text, fmt, args);
  va_end(args);
  std::fprintf(stderr, "conflux-perf net: plugin %s:%d: %s\n", file != nullptr ? file : "?", line, text);
}

std::unique_ptr<NetApi> loadNewest(const std::string& path, int version) {
  if (version != 0) return conflux::plugin::loadNet(path.c_str(), version);
  std::string lastError;
  for (int v = 11; v >= 8; --v) {
    try {
      return conflux::plugin::loadNet(path.c_str(), v);
    } catch (const std::exception& e) {
      lastError = e.what();
      if (lastError.rfind("dlopen", 0) == 0) break;  // the library itself did not load
    }
  }
  throw std::runtime_error(path + ": no ncclNetPlugin_v8..v11 (" + lastError + ")");
}

class PluginTarget final : public NetTarget {
 public:
  PluginTarget(const std::string& path, int version, int device, const std::vector<int>& merge,
               const NetBuffers& buffers, const PeerExchange& exchange)
      : path_(path), device_(device), merge_(merge), buffers_(buffers) {
    net_ = loadNewest(path, version);
    call(net_->init(logToStderr), "init");
    initialised_ = true;
    try {
      open(exchange);
    } catch (...) {
      close();  // the destructor does not run for a constructor that throws
      throw;
    }
  }

  ~PluginTarget() override { close(); }

  std::string label() const override {
    std::string out = net_->name != nullptr ? net_->name : "plugin";
    for (size_t i = 0; i < merge_.size(); ++i) {
      out.push_back(i == 0 ? '[' : '+');
      out.append(std::to_string(merge_[i]));
    }
    if (!merge_.empty()) out.push_back(']');
    return out;
  }

  std::string describe() const override {
    char line[512];
    std::snprintf(line, sizeof line, "plugin %s (ncclNetPlugin_v%d, \"%s\"), device %d \"%s\": speed %d Mb/s, "
                  "latency %.1f us, maxRecvs %d", path_.c_str(), net_->version, label().c_str(), device_,
                  deviceName_.c_str(), props_.speed, double(props_.latency), props_.maxRecvs);
    return line;
  }

  int maxInFlight() const override { return net_->maxRequests(); }

  int postSend(size_t bytes, int tag) override {
    return post(sends_, 0, [&](void** req) { return net_->isend(sendComm_, buffers_.send, bytes, tag, sendMr_, req); });
  }

  int postRecv(size_t bytes, int tag) override {
    return post(recvs_, kRecvBase, [&](void** req) {
      void* data = buffers_.recv;
      size_t size = bytes;
      int t = tag;
      return net_->irecv(recvComm_, 1, &data, &size, &t, &recvMr_, req);
    });
  }

  bool test(int handle, size_t* bytes) override {
    void*& req = handle >= kRecvBase ? recvs_[size_t(handle - kRecvBase)] : sends_[size_t(handle)];
    int done = 0;
    int size = 0;
    call(net_->test(req, &done, &size), "test");
    if (done == 0) return false;
    req = nullptr;
    if (bytes != nullptr) *bytes = size_t(size);
    return true;
  }

 private:
  static constexpr int kRecvBase = 1 << 16;

  void open(const PeerExchange& exchange) {
    if (!merge_.empty()) {
      if (net_->version < 9) throw std::runtime_error(path_ + ": --merge needs ncclNetPlugin_v9 or later");
      abi::VProps group{int(merge_.size()), {}};
      for (size_t i = 0; i < merge_.size(); ++i) group.devs[i] = merge_[i];
      call(net_->makeVDevice(&device_, &group), "makeVDevice");
    }
    int devices = 0;
    call(net_->devices(&devices), "devices");
    if (device_ < 0 || device_ >= devices) {
      throw std::runtime_error(path_ + ": --device " + std::to_string(device_) + " out of range (the plugin has " +
                               std::to_string(devices) + " devices)");
    }
    call(net_->properties(device_, &props_), "getProperties");
    deviceName_ = props_.name != nullptr ? props_.name : "?";
    connect(exchange);
    call(net_->regMr(sendComm_, buffers_.send, buffers_.bytes, abi::kPtrHost, &sendMr_), "regMr (send)");
    call(net_->regMr(recvComm_, buffers_.recv, buffers_.bytes, abi::kPtrHost, &recvMr_), "regMr (receive)");
    sends_.assign(size_t(net_->maxRequests()), nullptr);
    recvs_.assign(size_t(net_->maxRequests()), nullptr);
  }

  // Best effort: a failed run may leave requests in flight, which the plugin's close then reclaims.
  void close() {
    if (sendMr_ != nullptr) net_->deregMr(sendComm_, sendMr_);
    if (recvMr_ != nullptr) net_->deregMr(recvComm_, recvMr_);
    if (sendComm_ != nullptr) net_->closeSend(sendComm_);
    if (recvComm_ != nullptr) net_->closeRecv(recvComm_);
    if (listenComm_ != nullptr) net_->closeListen(listenComm_);
    if (initialised_) net_->finalize();
    sendMr_ = recvMr_ = sendComm_ = recvComm_ = listenComm_ = nullptr;
    initialised_ = false;
  }

  void call(int rc, const char* what) const {
    if (rc != 0) throw std::runtime_error(path_ + ": " + what + " returned ncclResult " + std::to_string(rc));
  }

  template <class Fn>
  int post(std::vector<void*>& slots, int base, Fn&& fn) {
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] != nullptr) continue;
      void* req = nullptr;
      call(fn(&req), "isend/irecv");
      if (req == nullptr) return -1;
      slots[i] = req;
      return base + int(i);
    }
    return -1;
  }

  // Each rank listens once and connects once, as NCCL's proxy does, with connect and accept called in
  // turn until both return a comm.
  void connect(const PeerExchange& exchange) {
    std::vector<uint8_t> handle(abi::kHandleBytes);
    call(net_->listen(device_, handle.data(), &listenComm_), "listen");
    std::vector<uint8_t> peer = exchange(handle);
    if (peer.size() != handle.size()) throw std::runtime_error("the peer's listen handle has the wrong size");
    const auto deadline = std::chrono::steady_clock::now() + kConnectTimeout;
    while (sendComm_ == nullptr || recvComm_ == nullptr) {
      if (sendComm_ == nullptr) call(net_->connect(device_, peer.data(), &sendComm_), "connect");
      if (recvComm_ == nullptr) call(net_->accept(listenComm_, &recvComm_), "accept");
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error(path_ + ": no connection with the peer within 60 s");
      }
      if (sendComm_ == nullptr || recvComm_ == nullptr) std::this_thread::yield();
    }
  }

  std::string path_;
  int device_;
  std::vector<int> merge_;
  NetBuffers buffers_;
  std::unique_ptr<NetApi> net_;
  bool initialised_ = false;
  abi::PropertiesV11 props_{};
  std::string deviceName_;
  void* listenComm_ = nullptr;
  void* sendComm_ = nullptr;
  void* recvComm_ = nullptr;
  void* sendMr_ = nullptr;
  void* recvMr_ = nullptr;
  std::vector<void*> sends_, recvs_;
};

}  // namespace

std::unique_ptr<NetTarget> makePluginTarget(const std::string& path, int version, int device,
                                            const std::vector<int>& merge, const NetBuffers& buffers,
                                            const PeerExchange& exchange) {
  return std::make_unique<PluginTarget>(path, version, device, merge, buffers, exchange);
}

}  // namespace cfxperf
