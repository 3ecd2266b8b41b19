// conflux-trace: reads the flight-recorder dumps that the ranks of a job wrote to CONFLUX_TRACE_DIR and
// says, per communicator, where the ranks diverged, who never joined, who waited for whom, the first
// error and the ranks to suspect (docs/observability.md).
//
//   conflux-trace [--json] DIR [DIR...]
//
// Exit status: 0 when dumps were read, 1 when none were found or one could not be read, 2 on usage errors.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "tools/trace/trace_analysis.h"

int main(int argc, char** argv) {
  bool json = false;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::printf("usage: conflux-trace [--json] DIR [DIR...]\n"
                  "Reads the flight-recorder dumps (CONFLUX_TRACE_DIR) of every rank and says where they diverged.\n");
      return 0;
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr, "conflux-trace: unknown option %s (try --help)\n", argv[i]);
      return 2;
    } else {
      dirs.emplace_back(argv[i]);
    }
  }
  if (dirs.empty()) {
    std::fprintf(stderr, "usage: conflux-trace [--json] DIR [DIR...]\n");
    return 2;
  }
  std::vector<conflux::trace::RankDump> dumps;
  std::vector<std::string> skipped;
  try {
    for (const std::string& d : dirs) {
      auto more = conflux::trace::loadDumps(d, &skipped);
      dumps.insert(dumps.end(), more.begin(), more.end());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "conflux-trace: %s\n", e.what());
    return 1;
  }
  for (const std::string& s : skipped) std::fprintf(stderr, "conflux-trace: skipped %s\n", s.c_str());
  if (dumps.empty()) {
    std::fprintf(stderr, "conflux-trace: no flight-recorder dumps in %s\n", dirs.front().c_str());
    return 1;
  }
  std::printf("%s", conflux::trace::render(conflux::trace::analyze(dumps), json).c_str());
  return 0;
}
