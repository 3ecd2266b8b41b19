// conflux-perf: the -J report. One JSON document per run, written by rank 0 when the run ends; the schema
// ("conflux-perf/1") is documented in docs/perf-suite.md and only grows by new keys.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>

#include "results.h"

namespace cfxperf {

class JsonReport {
 public:
  /// Checks that @p path can be written (creating or truncating it); throws std::runtime_error if not.
  explicit JsonReport(std::string path);
  ~JsonReport();
  void begin(const RunInfo& info);
  void row(const RowResult& row);
  void skipped(cfxDataType_t type, const std::string& redop, const std::string& reason);
  /// Writes the whole document; throws std::runtime_error if the file cannot be written.
  void finish(const RunInfo& info, const Summary& summary);

 private:
  std::string path_;
  std::string startTime_;
  std::unique_ptr<nlohmann::ordered_json> rows_;     ///< an array: one object per row
  std::unique_ptr<nlohmann::ordered_json> skipped_;  ///< an array: one object per skipped (type, op)
};

}  // namespace cfxperf
