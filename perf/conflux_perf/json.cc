// conflux-perf: JSON encoding of the run (a small writer of our own: objects, arrays, numbers, strings).
#include "json.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <stdexcept>

#include "collectives.h"

namespace cfxperf {

namespace {

// Builds one JSON object or array, adding commas between members.
class Builder {
 public:
  explicit Builder(char open) : text_(1, open), close_(open == '{' ? '}' : ']') {}
  Builder& raw(const std::string& key, const std::string& json) {
    text_ += (first_ ? "" : ",");
    first_ = false;
    if (!key.empty()) text_ += jsonQuote(key) + ":";
    text_ += json;
    return *this;
  }
  Builder& str(const std::string& key, const std::string& v) { return raw(key, jsonQuote(v)); }
  Builder& num(const std::string& key, double v) { return raw(key, number(v)); }
  Builder& integer(const std::string& key, long long v) { return raw(key, std::to_string(v)); }
  Builder& boolean(const std::string& key, bool v) { return raw(key, v ? "true" : "false"); }
  std::string done() const { return text_ + close_; }

  static std::string number(double v) {
    if (!std::isfinite(v)) return "null";
    char buf[64];
    snprintf(buf, sizeof buf, "%.17g", v);  // round-trips exactly
    return buf;
  }

 private:
  std::string text_;
  char close_;
  bool first_ = true;
};

std::string now() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S%z", &tm);
  return buf;
}

std::string placeJson(const PlaceResult& r) {
  if (!r.ran) return "null";
  return Builder('{')
      .num("time", r.timeUs)
      .num("alg_bw", r.algbw)
      .num("bus_bw", r.busbw)
      .raw("nwrong", r.wrong < 0 ? "null" : std::to_string(r.wrong))
      .done();
}

std::string ratio(const PlaceResult& mpi, const PlaceResult& main) {
  return mpi.ran && main.ran && main.timeUs > 0 ? Builder::number(mpi.timeUs / main.timeUs) : "null";
}

}  // namespace

std::string jsonQuote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

JsonReport::JsonReport(std::string path) : path_(std::move(path)) {
  FILE* f = std::fopen(path_.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("-J " + path_ + ": cannot write the file");
  std::fclose(f);
}

void JsonReport::begin(const RunInfo&) { startTime_ = now(); }

void JsonReport::row(const RowResult& r) {
  Builder b('{');
  b.integer("size", static_cast<long long>(r.bytes))
      .integer("count", static_cast<long long>(r.count))
      .str("type", typeName(r.type))
      .str("redop", r.redop)
      .integer("root", r.root)
      .raw("out_of_place", placeJson(r.main[0]))
      .raw("in_place", placeJson(r.main[1]));
  if (r.compared) {
    Builder mpi('{');
    mpi.raw("out_of_place", placeJson(r.mpi[0])).raw("in_place", placeJson(r.mpi[1]));
    mpi.raw("ratio", Builder('{')
                         .raw("out_of_place", ratio(r.mpi[0], r.main[0]))
                         .raw("in_place", ratio(r.mpi[1], r.main[1]))
                         .done());
    mpi.raw("skipped", r.mpiSkipped.empty() ? "null" : jsonQuote(r.mpiSkipped));
    b.raw("compare", mpi.done());
  }
  rows_.push_back(b.done());
}

void JsonReport::skipped(cfxDataType_t type, const std::string& redop, const std::string& reason) {
  skipped_.push_back(Builder('{').str("type", typeName(type)).str("redop", redop).str("reason", reason).done());
}

void JsonReport::finish(const RunInfo& info, const Summary& s) {
  const Options& o = *info.opts;
  Builder args('[');
  for (const std::string& a : o.argv) args.str("", a);
  Builder backends('[');
  for (const std::string& name : info.backends) backends.str("", name);
  Builder types('['), ops('[');
  for (cfxDataType_t t : o.types) types.str("", typeName(t));
  for (cfxRedOp_t op : o.ops) ops.str("", opName(op));
  Builder config('{');
  config.integer("minimum_bytes", static_cast<long long>(o.minBytes))
      .integer("maximum_bytes", static_cast<long long>(o.maxBytes));
  if (o.stepFactor > 1) {
    config.integer("step_factor", static_cast<long long>(o.stepFactor));
  } else {
    config.integer("step_bytes", static_cast<long long>(o.stepBytes));
  }
  config.integer("warmup_iters", o.warmup)
      .integer("iterations", o.iters)
      .integer("aggregated_iterations", o.aggIters)
      .integer("run_cycles", o.runCycles)
      .integer("validation", o.check)
      .integer("average", o.average)
      .boolean("blocking", o.blocking != 0)
      .integer("timeout_s", o.timeoutSec)
      .boolean("pinned", o.pin)
      .str("memory", o.memory == Memory::Cuda ? "cuda" : "host")
      .raw("datatypes", types.done())
      .raw("ops", ops.done())
      .integer("root", o.root);
  Builder devices('[');
  for (const DeviceLine& d : info.devices) {
    Builder dev('{');
    dev.integer("rank", d.rank)
        .integer("pid", d.pid)
        .str("hostname", d.host)
        .integer("local_rank", d.localRank)
        .str("cores", d.cores)
        .str("memory", d.gpu >= 0 ? "cuda" : "host");
    if (d.gpu >= 0) dev.integer("gpu", d.gpu).str("gpu_name", d.gpuName).str("bus_id", d.busId);
    devices.raw("", dev.done());
  }
  Builder versions('{');
  for (size_t i = 0; i < info.backends.size() && i < info.backendVersions.size(); ++i) {
    if (!info.backendVersions[i].empty()) versions.str(info.backends[i], info.backendVersions[i]);
  }
  Builder rows('['), skipped('[');
  for (const std::string& r : rows_) rows.raw("", r);
  for (const std::string& r : skipped_) skipped.raw("", r);
  const CollInfo& coll = collInfo(o.coll);
  Builder doc('{');
  doc.str("schema", "conflux-perf/1")
      .str("conflux_version", std::to_string(CFX_MAJOR) + "." + std::to_string(CFX_MINOR) + "." +
                                  std::to_string(CFX_PATCH))
      .str("start_time", startTime_)
      .str("end_time", now())
      .str("command_line", info.commandLine)
      .raw("args", args.done())
      .raw("machine", Builder('{')
                          .str("hostname", info.devices.empty() ? "" : info.devices[0].host)
                          .str("cpu_model", info.cpuModel)
                          .integer("cores", info.cores)
                          .done())
      .str("collective", coll.command)
      .str("nccl_tests_name", coll.ncclTestsName)
      .integer("ranks", info.nranks)
      .str("launch", info.launch)
      .raw("backends", backends.done())
      .raw("backend_versions", versions.done())
      .raw("config", config.done())
      .raw("devices", devices.done())
      .raw("results", rows.done())
      .raw("skipped", skipped.done())
      .raw("out_of_bounds", Builder('{').integer("count", s.errors).boolean("okay", s.errors == 0).done())
      .num("average_bus_bandwidth", s.avgBusbw)
      .raw("minimum_bus_bandwidth", s.minBusbw < 0 ? "null" : Builder::number(s.minBusbw));
  if (info.backends.size() > 1) {
    doc.raw("compare", Builder('{')
                           .str("backend", info.backends[1])
                           .integer("wrong_results", s.mpiErrors)
                           .num("average_bus_bandwidth", s.mpiAvgBusbw)
                           .num("busbw_ratio_geomean", s.ratioGeomean)
                           .done());
  }
  std::string text = doc.done() + "\n";
  FILE* f = std::fopen(path_.c_str(), "w");
  if (f == nullptr || std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
    if (f) std::fclose(f);
    throw std::runtime_error("-J " + path_ + ": cannot write the file");
  }
  if (std::fclose(f) != 0) throw std::runtime_error("-J " + path_ + ": cannot write the file");
}

}  // namespace cfxperf
