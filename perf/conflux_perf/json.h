// conflux-perf: the -J report. One JSON document per run, written by rank 0 when the run ends; the schema
// ("conflux-perf/1") is documented in docs/perf-suite.md and only grows by new keys.
#pragma once

#include <string>
#include <vector>

#include "results.h"

namespace cfxperf {

class JsonReport {
 public:
  /// Checks that @p path can be written (creating or truncating it); throws std::runtime_error if not.
  explicit JsonReport(std::string path);
  void begin(const RunInfo& info);
  void row(const RowResult& row);
  void skipped(cfxDataType_t type, const std::string& redop, const std::string& reason);
  /// Writes the whole document; throws std::runtime_error if the file cannot be written.
  void finish(const RunInfo& info, const Summary& summary);

 private:
  std::string path_;
  std::string startTime_;
  std::vector<std::string> rows_;     ///< each row already encoded
  std::vector<std::string> skipped_;  ///< each skipped (type, op) already encoded
};

/// A JSON string literal for @p text (quotes and escapes included).
std::string jsonQuote(const std::string& text);

}  // namespace cfxperf
