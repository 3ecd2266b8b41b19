// The tests' view of an ncclTuner plugin: one interface over v5 and v4, filled from the struct a
// dlopen'ed library exports (dlsym "ncclTunerPlugin_vN"), a logger that captures what the plugin logs,
// and cost tables built the way NCCL builds them (a contiguous float[7][3] passed as float**).
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "plugin/nccl_tuner_abi.h"

namespace conflux::plugintest {

namespace abi = conflux::plugin::abi;

/// Everything the plugin logged through the captured logger, in order.
struct LogLine {
  int level;
  std::string text;
};
inline std::vector<LogLine>& capturedLogs() {
  static std::vector<LogLine> logs;
  return logs;
}
extern "C" inline void captureLogger(int level, unsigned long /*flags*/, const char* /*file*/, int /*line*/,
                                     const char* fmt, ...) {
  char buf[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  capturedLogs().push_back({level, buf});
}
inline std::vector<std::string> warnings() {
  std::vector<std::string> out;
  for (const LogLine& l : capturedLogs()) {
    if (l.level == abi::kLogWarn) out.push_back(l.text);
  }
  return out;
}

/// A tuner symbol of one library: v5 or v4, driven through its function pointers only.
struct TunerApi {
  std::string library;
  int version = 0;
  const abi::TunerV5* v5 = nullptr;
  const abi::TunerV4* v4 = nullptr;

  /// Loads `symbol` ("ncclTunerPlugin_v5" or "_v4") from `path`; ok() is false when either is missing.
  TunerApi(const std::string& path, int v) : library(path), version(v) {
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    if (v == 5) v5 = static_cast<const abi::TunerV5*>(::dlsym(lib, "ncclTunerPlugin_v5"));
    if (v == 4) v4 = static_cast<const abi::TunerV4*>(::dlsym(lib, "ncclTunerPlugin_v4"));
  }
  bool ok() const { return v5 != nullptr || v4 != nullptr; }
  const char* name() const { return v5 ? v5->name : v4->name; }

  int init(size_t nRanks, size_t nNodes, void** ctx, abi::Logger logger = captureLogger) const {
    if (v5 != nullptr) {
      abi::NvlDomainInfo nvl{int(nNodes), int(nRanks / (nNodes ? nNodes : 1)), int(nRanks / (nNodes ? nNodes : 1))};
      static abi::TunerConstants constants{};  // NCCL's would be filled; the tuner must not need them
      return v5->init(ctx, 0x1234, nRanks, nNodes, logger, &nvl, &constants);
    }
    return v4->init(nRanks, nNodes, logger, ctx);
  }
  int getCollInfo(void* ctx, int coll, size_t bytes, float* table, int numAlgo, int numProto, int* nChannels) const {
    auto fn = v5 != nullptr ? v5->getCollInfo : v4->getCollInfo;
    return fn(ctx, coll, bytes, 1, reinterpret_cast<float**>(table), numAlgo, numProto, 0, nChannels);
  }
  int finalize(void* ctx) const { return v5 != nullptr ? v5->finalize(ctx) : v4->destroy(ctx); }
};

/// The libraries that carry the tuner: its own, and the net plugin when it was built.
inline std::vector<std::string> tunerLibraries() {
  std::vector<std::string> libs{CONFLUX_TUNER_PATH};
  if (std::string(CONFLUX_NET_PATH).size() > 0) libs.push_back(CONFLUX_NET_PATH);
  return libs;
}

/// (library, version) for every tuner symbol, and a test name for each ("TunerLibV5", "NetLibV4").
inline std::vector<std::tuple<std::string, int>> tunerApis() {
  std::vector<std::tuple<std::string, int>> out;
  for (const std::string& lib : tunerLibraries()) {
    out.emplace_back(lib, 5);
    out.emplace_back(lib, 4);
  }
  return out;
}
inline std::string tunerApiName(const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  const bool net = std::get<0>(info.param).find("nccl-net") != std::string::npos;
  return std::string(net ? "NetLib" : "TunerLib") + "V" + std::to_string(std::get<1>(info.param));
}

/// A cost table as NCCL fills it before calling the tuner: every entry -1 (unavailable), then NCCL's
/// time estimates (us: a latency plus bytes over a bandwidth) for the pairs it can run. TREE runs
/// all-reduce only; RING every collective; COLLNET, NVLS and PAT are unavailable (no such hardware);
/// `ll128` false models GPUs without LL128.
struct NcclTable {
  float cost[abi::kNumAlgorithms][abi::kNumProtocols];

  NcclTable(int coll, size_t bytes, bool ll128 = true) {
    for (auto& row : cost) {
      for (float& e : row) e = abi::kCostUnavailable;
    }
    const double latency[abi::kNumProtocols] = {6.8, 14.0, 24.0};   // us per call
    const double bandwidth[abi::kNumProtocols] = {8.0, 40.0, 45.0};  // GB/s (1 GB/s = 1000 bytes per us)
    for (int a : {abi::kAlgoTree, abi::kAlgoRing}) {
      if (a == abi::kAlgoTree && coll != abi::kCollAllReduce) continue;
      for (int p = 0; p < abi::kNumProtocols; ++p) {
        if (p == abi::kProtoLL128 && !ll128) continue;
        cost[a][p] = float(latency[p] * (a == abi::kAlgoTree ? 1.5 : 1.0) + double(bytes) / (bandwidth[p] * 1e3));
      }
    }
  }
  float* data() { return &cost[0][0]; }
};

}  // namespace conflux::plugintest
