// Metrics on real ranks: every rank serves /metrics and /status on PORT + its local rank, the counts
// match the calls made (operations, bytes, histogram by size class, sequence, algorithms, errors), the
// textfile is written at destroy, a malformed CONFLUX_METRICS_ADDR fails init naming it, and a taken
// port only costs the metrics. Prometheus itself scraping a job is tests/observability/.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <signal.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/metrics_http.h"
#include "tests/multiproc/harness.h"

using namespace conflux::testing;
using namespace conflux::metricstest;
namespace fs = std::filesystem;

namespace {

cfxResult_t initNamed(cfxComm_t* comm, int nranks, const cfxUniqueId& id, int rank, const char* name) {
  cfxConfig_t cfg = CFX_CONFIG_INITIALIZER;
  cfg.commName = name;
  return cfxCommInitRankConfig(comm, nranks, id, rank, &cfg);
}

}  // namespace

TEST(Metrics, ScrapeCountsEveryCall) {
  RunOptions opts;
  opts.env = {{"CONFLUX_METRICS_ADDR", "127.0.0.1:" + std::to_string(basePort())}, {"CONFLUX_JOB_ID", "job-42"}};
  auto out = runRanks(3, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (initNamed(&comm, nranks, id, rank, "train") != cfxSuccess) return 2;
    std::vector<float> small(8, 1.0f), large(size_t{1} << 16, 1.0f);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(cfxAllReduce(small.data(), small.data(), 8, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(cfxAllReduce(large.data(), large.data(), large.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    }
    for (int i = 0; i < 3; ++i) EXPECT_EQ(cfxBroadcast(small.data(), small.data(), 5, cfxFloat32, 1, comm, nullptr), cfxSuccess);

    // The rank's own server (local rank == rank here), between calls.
    const std::string resp = httpGet(basePort() + rank, "/metrics");
    EXPECT_NE(resp.find("HTTP/1.1 200"), std::string::npos) << resp.substr(0, 200);
    EXPECT_NE(resp.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << resp.substr(0, 300);
    const auto s = samples(bodyOf(resp));
    const std::string me = "rank=\"" + std::to_string(rank) + "\"";
    EXPECT_EQ(value(s, "conflux_build_info", {me, "job_id=\"job-42\"", "host=\""}), 1);
    const std::vector<std::string> ar = {me, "comm=\"train\"", "collective=\"allreduce\""};
    EXPECT_EQ(value(s, "conflux_collective_operations_total", ar), 15);
    EXPECT_EQ(value(s, "conflux_collective_bytes_total", ar), 10 * 32 + 5 * 262144);
    auto arClass = [&](const char* cls) {
      auto v = ar;
      v.push_back(std::string("size_class=\"") + cls + "\"");
      return v;
    };
    EXPECT_EQ(value(s, "conflux_collective_duration_seconds_count", arClass("32")), 10);
    EXPECT_EQ(value(s, "conflux_collective_duration_seconds_count", arClass("262144")), 5);
    auto inf = arClass("262144");
    inf.push_back("le=\"+Inf\"");
    EXPECT_EQ(value(s, "conflux_collective_duration_seconds_bucket", inf), 5);
    EXPECT_GT(value(s, "conflux_collective_duration_seconds_sum", arClass("262144")), 0);
    EXPECT_EQ(value(s, "conflux_collective_operations_total", {me, "collective=\"broadcast\""}), 3);
    EXPECT_EQ(value(s, "conflux_collective_bytes_total", {me, "collective=\"broadcast\""}), 3 * 20);
    EXPECT_EQ(value(s, "conflux_collective_sequence", {me}), 18);
    EXPECT_EQ(value(s, "conflux_collective_in_flight", {me}), 0);
    EXPECT_EQ(value(s, "conflux_communicator_ranks", {me}), 3);
    EXPECT_EQ(value(s, "conflux_communicator_healthy", {me}), 1);
    EXPECT_EQ(value(s, "conflux_collective_errors_total", {me, "kind=\"timeout\""}), 0);
    EXPECT_GT(value(s, "conflux_collective_last_progress_timestamp_seconds", {me}), 1.6e9);
    double byAlgorithm = 0;
    for (const auto& [key, v] : s) {
      if (key.rfind("conflux_collective_algorithm_operations_total{", 0) == 0 && key.find("\"allreduce\"") != std::string::npos) {
        byAlgorithm += v;
      }
    }
    EXPECT_EQ(byAlgorithm, 15);

    const std::string status = httpGet(basePort() + rank, "/status");
    EXPECT_NE(status.find("Content-Type: application/json"), std::string::npos);
    EXPECT_NE(status.find("\"schema\":\"conflux.status\""), std::string::npos) << status.substr(0, 400);
    EXPECT_NE(status.find("\"reason\":\"status\""), std::string::npos);
    EXPECT_NE(status.find("\"name\":\"train\""), std::string::npos);
    EXPECT_NE(httpGet(basePort() + rank, "/nothing").find("404"), std::string::npos);
    // Every rank scraped before any leaves.
    EXPECT_EQ(cfxAllReduce(small.data(), small.data(), 1, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

TEST(Metrics, RingMessagesAreCountedByPeerClass) {
  RunOptions opts;
  opts.env = {{"CONFLUX_METRICS_ADDR", "127.0.0.1:" + std::to_string(basePort() + 4)}, {"CONFLUX_ALGO", "allreduce=ring"}};
  auto out = runRanks(3, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    std::vector<float> buf(3 * 4096, 1.0f);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    const std::string resp = httpGet(basePort() + 4 + rank, "/metrics");
    const auto s = samples(bodyOf(resp));
    // A ring all-reduce sends and receives 2 (n - 1) / n of the buffer per call.
    const std::vector<std::string> local = {"transport=\"shm\"", "peer=\"local\""};
    EXPECT_EQ(value(s, "conflux_transport_sent_bytes_total", local), 5 * 65536);
    EXPECT_EQ(value(s, "conflux_transport_received_bytes_total", local), 5 * 65536);
    EXPECT_GE(value(s, "conflux_transport_sent_messages_total", local), 5 * 4);
    EXPECT_GE(value(s, "conflux_transport_wait_seconds_total", local), 0);
    EXPECT_EQ(resp.find("peer=\"remote\""), std::string::npos) << "one node has no network";
    EXPECT_EQ(value(s, "conflux_collective_algorithm_operations_total", {"algorithm=\"ring\""}), 5);
    EXPECT_EQ(cfxAllReduce(buf.data(), buf.data(), 1, cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

#if CONFLUX_TEST_OFI
// Two simulated nodes over libfabric (tcp on loopback): the network's traffic by peer class and each
// rail's NIC series. A ring all-reduce sends and receives 2 (n - 1) / n of the buffer per call: all of it
// with 2 ranks.
TEST(Metrics, RailsCountTheNetworkBytes) {
  // Each simulated node's rank has local rank 0, so both would take one HTTP port: the files instead.
  const fs::path dir = fs::temp_directory_path() / ("cfx-rails-" + std::to_string(getpid()));
  fs::create_directories(dir);
  RunOptions opts;
  opts.env = {{"CONFLUX_METRICS_FILE", (dir / "conflux.%r.prom").string()}, {"CONFLUX_NET", "ofi"},
              {"CONFLUX_ALGO", "allreduce=ring"}, {"CONFLUX_COST_PROBE", "0"}};  // the probe moves megabytes
  auto out = runRanks(2, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    simulateNode(rank);
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    std::vector<float> buf(1 << 18, 1.0f);  // 1 MiB
    for (int i = 0; i < 3; ++i) EXPECT_EQ(cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);  // writes the file with the final values
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
  for (int r = 0; r < 2; ++r) {
    const std::optional<std::string> text = fileText(dir / ("conflux." + std::to_string(r) + ".prom"));
    ASSERT_TRUE(text.has_value()) << "no file for rank " << r;
    const auto s = samples(*text);
    const std::vector<std::string> remote = {"transport=\"ofi\"", "peer=\"remote\""};
    EXPECT_EQ(value(s, "conflux_transport_sent_bytes_total", remote), 3 * (1 << 20));
    EXPECT_EQ(value(s, "conflux_transport_received_bytes_total", remote), 3 * (1 << 20));
    EXPECT_GE(value(s, "conflux_transport_retries_total", remote), 0);
    // The rail carries the plan's bytes (and the init's few): at least as many, and not double.
    const double nicSent = value(s, "conflux_nic_sent_bytes_total", {"rail=\"0\""});
    EXPECT_GE(nicSent, 3 * (1 << 20));
    EXPECT_LT(nicSent, 2 * 3 * (1 << 20));
    EXPECT_GE(value(s, "conflux_nic_received_bytes_total", {"rail=\"0\""}), 3 * (1 << 20));
    EXPECT_EQ(text->find("nic=\"\""), std::string::npos) << "a rail without its NIC's name";
  }
  fs::remove_all(dir);
}
#endif

TEST(Metrics, FileIsWrittenAtDestroyAndErrorsAreCounted) {
  const fs::path dir = fs::temp_directory_path() / ("cfx-metrics-" + std::to_string(getpid()));
  fs::create_directories(dir);
  RunOptions opts;
  opts.env = {{"CONFLUX_METRICS_FILE", (dir / "conflux.%r.prom").string()}};
  auto out = runRanks(2, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    std::vector<float> buf(16384, 1.0f);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(cfxAllGather(buf.data(), buf.data() + 2048, 1024, cfxFloat32, comm, nullptr), cfxSuccess);
    // Mismatched counts: an invalid-usage error on every rank.
    EXPECT_EQ(cfxAllReduce(buf.data(), buf.data(), rank == 0 ? 16384 : 8192, cfxFloat32, cfxSum, comm, nullptr), cfxInvalidUsage);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
  for (int r = 0; r < 2; ++r) {
    const std::optional<std::string> text = fileText(dir / ("conflux." + std::to_string(r) + ".prom"));
    ASSERT_TRUE(text.has_value()) << "no file for rank " << r;
    const auto s = samples(*text);
    EXPECT_EQ(value(s, "conflux_collective_operations_total", {"collective=\"allgather\""}), 4);
    EXPECT_EQ(value(s, "conflux_collective_bytes_total", {"collective=\"allgather\""}), 4 * 8192);
    EXPECT_GE(value(s, "conflux_collective_errors_total", {"kind=\"invalid_usage\""}), 1);
  }
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().extension(), ".prom") << e.path();
  fs::remove_all(dir);
}

TEST(Metrics, MalformedAddressFailsInitNamingTheVariable) {
  RunOptions opts;
  opts.env = {{"CONFLUX_METRICS_ADDR", "localhost"}};
  auto out = runRanks(1, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm = nullptr;
    EXPECT_EQ(cfxCommInitRank(&comm, nranks, id, rank), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("CONFLUX_METRICS_ADDR='localhost' has no port")) << cfxGetLastError(nullptr);
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
  // A list would make civetweb listen on every address in it.
  opts.env = {{"CONFLUX_METRICS_ADDR", "8080,127.0.0.1:9400"}};
  out = runRanks(1, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm = nullptr;
    EXPECT_EQ(cfxCommInitRank(&comm, nranks, id, rank), cfxInvalidArgument);
    EXPECT_TRUE(lastErrorMentions("is not one address")) << cfxGetLastError(nullptr);
    return 0;
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

TEST(Metrics, TakenPortCostsOnlyTheMetrics) {
  const int port = basePort() + 8;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  ASSERT_EQ(listen(fd, 1), 0);
  RunOptions opts;
  opts.env = {{"CONFLUX_METRICS_ADDR", "127.0.0.1:" + std::to_string(port)}};
  auto out = runRanks(1, [](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    EXPECT_EQ(cfxCommInitRank(&comm, nranks, id, rank), cfxSuccess);
    std::vector<float> buf(16, 1.0f);
    EXPECT_EQ(cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  close(fd);
  EXPECT_TRUE(allSucceeded(out));
}

#ifdef CONFLUX_STATUS_BIN
// conflux-status on a live job: one rank stopped (SIGSTOP: it answers nothing, not even /status), the
// others blocked in a call waiting for it. The tool names the stopped rank; the job then goes on.
TEST(Metrics, LiveStatusNamesTheStoppedRank) {
  const fs::path stop = fs::temp_directory_path() / ("cfx-status-stop-" + std::to_string(getpid()));
  fs::remove(stop);
  const int port = basePort() + 10;
  std::string text;
  int rc = -1;
  RunOptions opts;
  opts.env = {{"CONFLUX_METRICS_ADDR", "127.0.0.1:" + std::to_string(port)}, {"CONFLUX_TIMEOUT_MS", "60000"}};
  opts.whileRunning = [&](const std::vector<int>& pids) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    kill(pids[2], SIGSTOP);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const std::string cmd = std::string(CONFLUX_STATUS_BIN) + " --timeout-ms 1500 127.0.0.1:" + std::to_string(port) +
                            "-" + std::to_string(port + 2) + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::array<char, 512> buf{};
    while (p != nullptr && fgets(buf.data(), buf.size(), p) != nullptr) text += buf.data();
    if (p != nullptr) {
      const int status = pclose(p);
      rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    kill(pids[2], SIGCONT);
    std::ofstream(stop).put('1');
  };
  auto out = runRanks(3, [&stop](int rank, int nranks, const cfxUniqueId& id) -> int {
    cfxComm_t comm;
    if (cfxCommInitRank(&comm, nranks, id, rank) != cfxSuccess) return 2;
    std::vector<float> buf(size_t{1} << 14, 1.0f);
    for (float done = 0; done == 0;) {  // until rank 0 sees the stop file: every rank makes the same calls
      EXPECT_EQ(cfxAllReduce(buf.data(), buf.data(), buf.size(), cfxFloat32, cfxSum, comm, nullptr), cfxSuccess);
      done = rank == 0 && fs::exists(stop) ? 1.0f : 0.0f;
      EXPECT_EQ(cfxAllReduce(&done, &done, 1, cfxFloat32, cfxMax, comm, nullptr), cfxSuccess);
    }
    EXPECT_EQ(cfxCommDestroy(comm), cfxSuccess);
    return 0;
  }, opts);
  fs::remove(stop);
  EXPECT_TRUE(allSucceeded(out));
  EXPECT_EQ(rc, 1) << "rank 2 cannot answer, so conflux-status reports a failure: " << text;
  EXPECT_NE(text.find("127.0.0.1:" + std::to_string(port + 2)), std::string::npos) << text;
  EXPECT_NE(text.find("suspect: rank 2"), std::string::npos) << text;
  EXPECT_NE(text.find("waiting for rank 2"), std::string::npos) << text;
  std::printf("%s", text.c_str());
}
#endif
