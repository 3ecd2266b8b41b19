// conflux-perf: the text report, column for column nccl-tests' (2.17+ layout): header lines, one
// "#  Rank .. device .." line per rank (cores and host memory instead of a GPU), the two-level column
// header, one row per size (out of place, then in place) and the footer. With --compare the MPI time,
// busbw and ratio columns come after nccl-tests' columns, and with --percentiles the p50, p99 and max
// columns after those (out of place, in place, then the comparison's), so parsers that read fields by
// position from the left still work.
#pragma once

#include <cstdio>
#include <set>
#include <string>

#include "results.h"

namespace cfxperf {

/// nccl-tests' number formatting: "%.2f" if it fits in @p width, else "%.1f", "%.0f", then "%.1e".
std::string formatFloat(double value, int width);

class TextReport {
 public:
  explicit TextReport(FILE* out) : out_(out) {}
  /// Everything before the first row.
  void header(const RunInfo& info);
  /// A comment line ("# " + text), printed once per distinct text.
  void noteOnce(const std::string& text);
  void row(const RowResult& row);
  void footer(const RunInfo& info, const Summary& summary);

 private:
  FILE* out_;
  bool compare_ = false;
  bool percentiles_ = false;
  std::string other_ = "mpi";  ///< the comparison backend's name
  std::set<std::string> notes_;
};

}  // namespace cfxperf
