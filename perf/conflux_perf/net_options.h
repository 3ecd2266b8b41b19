// conflux-perf net: command-line options (see netUsageText and docs/perf-suite.md).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace cfxperf {

/// One thing to measure, in command-line order; the first is the baseline of the ratio columns.
struct NetTargetSpec {
  bool raw = false;    ///< --raw: conflux::ofi::Transport
  std::string plugin;  ///< --plugin PATH
  std::vector<int> merge;  ///< --merge LIST: the plugin's virtual device of these physical devices
};

struct NetOptions {
  std::vector<NetTargetSpec> targets;  ///< empty: --raw alone
  int version = 0;                     ///< --version: plugin ABI (0: the newest exported)
  int device = 0;                      ///< --device: plugin device index
  size_t minBytes = 8;                 ///< -b
  size_t maxBytes = size_t{16} << 20;  ///< -e
  size_t stepFactor = 2;               ///< -f
  int iters = 0;                       ///< -n: iterations per batch (0: by size)
  int repeats = 5;                     ///< --repeats: batches per row; the median is reported
  int window = 16;                     ///< --window: messages in flight (capped by each target)
  bool uni = true, bidir = true;       ///< --dir uni|bidir|both
  int ranks = 0;                       ///< --ranks: fork this many local ranks (must be 2; 0: launcher)
  bool pin = false;                    ///< --pin: rank r on core r % cores
};

enum class NetParse { Ok, Help, Error };

/// Parses `conflux-perf net ...` (argv[1] is "net"). On Error, *error names the flag.
NetParse parseNetOptions(int argc, char** argv, NetOptions* opts, std::string* error);
std::string netUsageText();

/// Runs `conflux-perf net`; returns the exit status (0: every byte checked was right).
int runNet(int argc, char** argv);

}  // namespace cfxperf
