// conflux-perf: JSON encoding of the run, with nlohmann::ordered_json (keys stay in the documented order;
// a value that is not finite becomes null).
#include "json.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>
#include <stdexcept>

#include "collectives.h"
#include "noise.h"

namespace cfxperf {

namespace {

using Json = nlohmann::ordered_json;

std::string now() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &tm);
  return buf;
}

Json placeJson(const PlaceResult& r) {
  if (!r.ran) return nullptr;
  Json j{{"time", r.timeUs},
         {"alg_bw", r.algbw},
         {"bus_bw", r.busbw},
         {"nwrong", r.wrong < 0 ? Json(nullptr) : Json(r.wrong)}};
  if (r.maxUs > 0) {  // --percentiles
    j["p50"] = r.p50Us;
    j["p99"] = r.p99Us;
    j["max"] = r.maxUs;
  }
  return j;
}

Json ratio(const PlaceResult& mpi, const PlaceResult& main) {
  return mpi.ran && main.ran && main.timeUs > 0 ? Json(mpi.timeUs / main.timeUs) : Json(nullptr);
}

}  // namespace

JsonReport::JsonReport(std::string path)
    : path_(std::move(path)),
      rows_(std::make_unique<Json>(Json::array())),
      skipped_(std::make_unique<Json>(Json::array())) {
  FILE* f = std::fopen(path_.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("-J " + path_ + ": cannot write the file");
  std::fclose(f);
}

JsonReport::~JsonReport() = default;

void JsonReport::begin(const RunInfo&) { startTime_ = now(); }

void JsonReport::row(const RowResult& r) {
  Json row{{"size", r.bytes},
           {"count", r.count},
           {"type", typeName(r.type)},
           {"redop", r.redop},
           {"root", r.root},
           {"out_of_place", placeJson(r.main[0])},
           {"in_place", placeJson(r.main[1])}};
  if (r.compared) {
    row["compare"] = Json{{"out_of_place", placeJson(r.mpi[0])},
                          {"in_place", placeJson(r.mpi[1])},
                          {"ratio", {{"out_of_place", ratio(r.mpi[0], r.main[0])},
                                     {"in_place", ratio(r.mpi[1], r.main[1])}}},
                          {"skipped", r.mpiSkipped.empty() ? Json(nullptr) : Json(r.mpiSkipped)}};
  }
  rows_->push_back(std::move(row));
}

void JsonReport::skipped(cfxDataType_t type, const std::string& redop, const std::string& reason) {
  skipped_->push_back(Json{{"type", typeName(type)}, {"redop", redop}, {"reason", reason}});
}

void JsonReport::finish(const RunInfo& info, const Summary& s) {
  const Options& o = *info.opts;
  Json types = Json::array(), ops = Json::array();
  for (cfxDataType_t t : o.types) types.push_back(typeName(t));
  for (cfxRedOp_t op : o.ops) ops.push_back(opName(op));
  Json config{{"minimum_bytes", o.minBytes}, {"maximum_bytes", o.maxBytes}};
  if (o.stepFactor > 1) {
    config["step_factor"] = o.stepFactor;
  } else {
    config["step_bytes"] = o.stepBytes;
  }
  config["warmup_iters"] = o.warmup;
  config["iterations"] = o.iters;
  config["aggregated_iterations"] = o.aggIters;
  config["run_cycles"] = o.runCycles;
  config["validation"] = o.check;
  config["average"] = o.average;
  config["blocking"] = o.blocking != 0;
  config["timeout_s"] = o.timeoutSec;
  config["pinned"] = o.pin;
  config["percentiles"] = o.percentiles;
  config["noise_processes"] = noiseInEffect();
  config["buffer_offset"] = o.bufferOffset;
  config["memory"] = o.memory == Memory::Cuda ? "cuda" : "host";
  config["datatypes"] = std::move(types);
  config["ops"] = std::move(ops);
  config["root"] = o.root;
  Json devices = Json::array();
  for (const DeviceLine& d : info.devices) {
    Json dev{{"rank", d.rank},       {"pid", d.pid},     {"hostname", d.host},
             {"local_rank", d.localRank}, {"cores", d.cores}, {"memory", d.gpu >= 0 ? "cuda" : "host"}};
    if (d.gpu >= 0) {
      dev["gpu"] = d.gpu;
      dev["gpu_name"] = d.gpuName;
      dev["bus_id"] = d.busId;
    }
    devices.push_back(std::move(dev));
  }
  Json versions = Json::object();
  for (size_t i = 0; i < info.backends.size() && i < info.backendVersions.size(); ++i) {
    if (!info.backendVersions[i].empty()) versions[info.backends[i]] = info.backendVersions[i];
  }
  const CollInfo& coll = collInfo(o.coll);
  Json doc{{"schema", "conflux-perf/1"},
           {"conflux_version",
            std::to_string(CFX_MAJOR) + "." + std::to_string(CFX_MINOR) + "." + std::to_string(CFX_PATCH)},
           {"start_time", startTime_},
           {"end_time", now()},
           {"command_line", info.commandLine},
           {"args", o.argv},
           {"machine", {{"hostname", info.devices.empty() ? "" : info.devices[0].host},
                        {"cpu_model", info.cpuModel},
                        {"cores", info.cores}}},
           {"collective", coll.command},
           {"nccl_tests_name", coll.ncclTestsName},
           {"ranks", info.nranks},
           {"launch", info.launch},
           {"backends", info.backends},
           {"backend_versions", std::move(versions)},
           {"config", std::move(config)},
           {"devices", std::move(devices)},
           {"results", *rows_},
           {"skipped", *skipped_},
           {"out_of_bounds", {{"count", s.errors}, {"okay", s.errors == 0}}},
           {"average_bus_bandwidth", s.avgBusbw},
           {"minimum_bus_bandwidth", s.minBusbw < 0 ? Json(nullptr) : Json(s.minBusbw)}};
  if (info.backends.size() > 1) {
    doc["compare"] = Json{{"backend", info.backends[1]},
                          {"wrong_results", s.mpiErrors},
                          {"average_bus_bandwidth", s.mpiAvgBusbw},
                          {"busbw_ratio_geomean", s.ratioGeomean}};
  }
  // Text from the command line or a host name that is not UTF-8 is written with U+FFFD, not refused.
  const std::string text = doc.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  FILE* f = std::fopen(path_.c_str(), "w");
  if (f == nullptr || std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
    if (f) std::fclose(f);
    throw std::runtime_error("-J " + path_ + ": cannot write the file");
  }
  if (std::fclose(f) != 0) throw std::runtime_error("-J " + path_ + ": cannot write the file");
}

}  // namespace cfxperf
