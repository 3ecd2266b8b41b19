// The NCCL plugins' metrics, in one process holding three copies of Conflux the way a PyTorch job with
// NCCL and the Conflux backend does: the net plugin (loaded first, as NCCL would), the tuner library
// (NCCL_TUNER_PLUGIN=conflux) and libconflux.so. One HTTP server serves them all (core/metrics/
// process_hub.h): the net plugin's traffic per device, the tuner's decisions and the communicator's
// calls in one exposition with one build_info. NCCL dlcloses plugins at finalisation; the copy that
// serves stays loaded and keeps serving.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "conflux/conflux.h"
#include "plugin/net_loader.h"
#include "tests/common/metrics_http.h"
#include "tests/plugin/tuner_api.h"

using namespace conflux::metricstest;
namespace nccl = conflux::plugin::abi;

namespace {

constexpr size_t kBytes = 1 << 20;

/// Polls `step` (a connect or accept call that yields a comm when done) for at most 10 s.
template <class F>
bool within10s(F&& step) {
  for (int i = 0; i < 100000; ++i) {
    if (step()) return true;
    usleep(100);
  }
  return false;
}

/// The number of times `needle` occurs in `text`.
int occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

/// libconflux's C API, taken from a dlopen'ed copy. RTLD_GLOBAL, loaded after the plugin started the
/// service: the copy then sees its own hub first in the global scope, and must still take the plugin's,
/// which was loaded first.
struct ConfluxLib {
  void* lib = nullptr;
  decltype(&cfxGetUniqueId) getUniqueId = nullptr;
  decltype(&cfxCommInitRank) initRank = nullptr;
  decltype(&cfxAllReduce) allReduce = nullptr;
  decltype(&cfxCommDestroy) destroy = nullptr;

  explicit ConfluxLib(const char* path) : lib(dlopen(path, RTLD_NOW | RTLD_GLOBAL)) {
    if (lib == nullptr) return;
    getUniqueId = reinterpret_cast<decltype(getUniqueId)>(dlsym(lib, "cfxGetUniqueId"));
    initRank = reinterpret_cast<decltype(initRank)>(dlsym(lib, "cfxCommInitRank"));
    allReduce = reinterpret_cast<decltype(allReduce)>(dlsym(lib, "cfxAllReduce"));
    destroy = reinterpret_cast<decltype(destroy)>(dlsym(lib, "cfxCommDestroy"));
  }
  bool ok() const { return getUniqueId && initRank && allReduce && destroy; }
};

}  // namespace

TEST(PluginMetrics, OneServiceForEveryCopyInTheProcess) {
  // No launcher variables: the local rank is unknown, so the service takes the first free port from
  // CONFLUX_METRICS_ADDR's. The first one is taken here.
  const int base = basePort();
  const int taken = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(base));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(taken, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(taken, 1), 0);
  const int port = base + 1;
  ASSERT_EQ(setenv("CONFLUX_METRICS_ADDR", ("127.0.0.1:" + std::to_string(base)).c_str(), 1), 0);
  ASSERT_EQ(setenv("CONFLUX_JOB_ID", "plugin-metrics", 1), 0);
  const std::string job = "job_id=\"plugin-metrics\"";

  // 1. The net plugin: one connection on device 0 to itself, 1 MiB each way.
  auto net = conflux::plugin::loadNet(CONFLUX_PLUGIN_PATH, 11);
  ASSERT_EQ(net->init(conflux::plugintest::captureLogger), 0);
  char handle[nccl::kHandleBytes] = {};
  void *listenComm = nullptr, *sendComm = nullptr, *recvComm = nullptr;
  ASSERT_EQ(net->listen(0, handle, &listenComm), 0);
  ASSERT_TRUE(within10s([&] {
    if (sendComm == nullptr) {
      EXPECT_EQ(net->connect(0, handle, &sendComm), 0);
    }
    if (recvComm == nullptr) {
      EXPECT_EQ(net->accept(listenComm, &recvComm), 0);
    }
    return sendComm != nullptr && recvComm != nullptr;
  }));
  std::vector<char> out(kBytes, 'x'), in(kBytes, 0);
  void *sendMr = nullptr, *recvMr = nullptr;
  ASSERT_EQ(net->regMr(sendComm, out.data(), kBytes, nccl::kPtrHost, &sendMr), 0);
  ASSERT_EQ(net->regMr(recvComm, in.data(), kBytes, nccl::kPtrHost, &recvMr), 0);
  void *sendReq = nullptr, *recvReq = nullptr;
  void* data = in.data();
  size_t size = kBytes;
  int tag = 7;
  ASSERT_TRUE(within10s([&] {
    if (recvReq == nullptr) {
      EXPECT_EQ(net->irecv(recvComm, 1, &data, &size, &tag, &recvMr, &recvReq), 0);
    }
    if (sendReq == nullptr) {
      EXPECT_EQ(net->isend(sendComm, out.data(), kBytes, tag, sendMr, &sendReq), 0);
    }
    return sendReq != nullptr && recvReq != nullptr;
  }));
  int sendDone = 0, recvDone = 0;
  ASSERT_TRUE(within10s([&] {
    int sizes[1] = {0};
    if (!sendDone) {
      EXPECT_EQ(net->test(sendReq, &sendDone, sizes), 0);
    }
    if (!recvDone) {
      EXPECT_EQ(net->test(recvReq, &recvDone, sizes), 0);
    }
    return sendDone && recvDone;
  }));
  EXPECT_EQ(in, out);

  // 2. The tuner library, a second copy: it must not start a server of its own.
  conflux::plugintest::TunerApi tuner(CONFLUX_TUNER_PATH, 5);
  ASSERT_TRUE(tuner.ok());
  void* tunerCtx = nullptr;
  ASSERT_EQ(tuner.init(16, 2, &tunerCtx), 0);
  for (size_t bytes : {size_t{8}, kBytes}) {
    conflux::plugintest::NcclTable table(nccl::kCollAllReduce, bytes);
    int channels = 0;
    ASSERT_EQ(tuner.getCollInfo(tunerCtx, nccl::kCollAllReduce, bytes, table.data(), nccl::kNumAlgorithms,
                                nccl::kNumProtocols, &channels), 0);
  }

  // 3. libconflux.so, a third copy: a communicator of one rank and one all-reduce.
  ConfluxLib lib(CONFLUX_LIB_PATH);
  ASSERT_TRUE(lib.ok()) << dlerror();
  cfxUniqueId id;
  ASSERT_EQ(lib.getUniqueId(&id), cfxSuccess);
  cfxComm_t comm = nullptr;
  ASSERT_EQ(lib.initRank(&comm, 1, id, 0), cfxSuccess);
  std::vector<float> values(1000, 1.0f);
  ASSERT_EQ(lib.allReduce(values.data(), values.data(), values.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);

  // One exposition with all three.
  std::string response = httpGet(port, "/metrics");
  ASSERT_NE(response.find("200 OK"), std::string::npos) << response;
  std::string text = bodyOf(response);
  EXPECT_EQ(occurrences(text, "# TYPE conflux_build_info "), 1) << text;
  auto s = samples(text);
  const std::vector<std::string> dev0 = {job, "comm=\"nccl-net\"", "rail=\"0\""};
  EXPECT_GE(value(s, "conflux_nic_sent_bytes_total", dev0), double(kBytes));
  EXPECT_GE(value(s, "conflux_nic_received_bytes_total", dev0), double(kBytes));
  const std::vector<std::string> plugin = {job, "transport=\"nccl-net\""};
  EXPECT_GE(value(s, "conflux_transport_sent_messages_total", plugin), 1);
  EXPECT_GE(value(s, "conflux_transport_received_bytes_total", plugin), double(kBytes));
  EXPECT_EQ(value(s, "conflux_transport_errors_total", plugin), 0);
  EXPECT_EQ(value(s, "conflux_nccl_net_connections", {job, "direction=\"send\""}), 1);
  EXPECT_EQ(value(s, "conflux_nccl_net_connections", {job, "direction=\"recv\""}), 1);
  EXPECT_EQ(value(s, "conflux_tuner_communicators", {job}), 1);
  EXPECT_EQ(value(s, "conflux_tuner_decisions_total",
                  {job, "collective=\"allreduce\"", "size_class=\"1048576\"", "by=\"model\""}), 1);
  EXPECT_EQ(value(s, "conflux_tuner_decisions_total", {job, "collective=\"allreduce\"", "size_class=\"8\""}), 1);
  EXPECT_EQ(value(s, "conflux_collective_operations_total", {job, "collective=\"allreduce\""}), 1);
  EXPECT_NE(bodyOf(httpGet(port, "/status")).find("\"sources\""), std::string::npos);

  // Closing the connections shows in the gauges; then NCCL's dlclose of the plugins.
  EXPECT_EQ(net->deregMr(sendComm, sendMr), 0);
  EXPECT_EQ(net->deregMr(recvComm, recvMr), 0);
  EXPECT_EQ(net->closeSend(sendComm), 0);
  EXPECT_EQ(net->closeRecv(recvComm), 0);
  EXPECT_EQ(net->closeListen(listenComm), 0);
  EXPECT_EQ(net->finalize(), 0);
  EXPECT_EQ(tuner.finalize(tunerCtx), 0);
  for (const char* path : {CONFLUX_PLUGIN_PATH, CONFLUX_TUNER_PATH}) {
    void* h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(h, nullptr);
    dlclose(h);
    dlclose(h);  // the loader's reference too: without RTLD_NODELETE the library would go now
    EXPECT_NE(dlopen(path, RTLD_NOW | RTLD_NOLOAD), nullptr) << path << " was unloaded while serving metrics";
  }
  text = bodyOf(httpGet(port, "/metrics"));
  s = samples(text);
  EXPECT_EQ(value(s, "conflux_nccl_net_connections", {job, "direction=\"send\""}), 0);
  EXPECT_EQ(value(s, "conflux_tuner_communicators", {job}), 0);
  EXPECT_EQ(value(s, "conflux_collective_operations_total", {job, "collective=\"allreduce\""}), 1);
  EXPECT_EQ(lib.destroy(comm), cfxSuccess);
  EXPECT_EQ(bodyOf(httpGet(port, "/metrics")).find("conflux_collective_operations_total"), std::string::npos);
  close(taken);
}
