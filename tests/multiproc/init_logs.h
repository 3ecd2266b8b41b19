// Every rank's INIT log in a file of its own, for tests that check what the library said it did (which
// tag space a communicator sends in, whose endpoints it shares).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/multiproc/harness.h"

namespace conflux::testing {

/// Lines of the file at `path` that contain `what`.
inline int linesContaining(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(what) != std::string::npos ? 1 : 0;
  return n;
}

/// Every rank's INIT log, one file per process (CONFLUX_DEBUG_FILE with %p) in a directory of its own,
/// removed with the logs when this goes.
class InitLogs {
 public:
  InitLogs() {
    char dir[] = "/tmp/conflux-initlog-XXXXXX";
    if (::mkdtemp(dir) == nullptr) std::abort();
    dir_ = dir;
  }
  ~InitLogs() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  InitLogs(const InitLogs&) = delete;
  InitLogs& operator=(const InitLogs&) = delete;
  /// runRanks options that make each rank log there.
  RunOptions options() const {
    RunOptions opts;
    opts.env = {{"CONFLUX_DEBUG", "INFO"}, {"CONFLUX_DEBUG_SUBSYS", "INIT"}, {"CONFLUX_DEBUG_FILE", dir_ + "/%p.log"}};
    return opts;
  }
  /// The calling process's log.
  std::string mine() const { return dir_ + "/" + std::to_string(::getpid()) + ".log"; }

 private:
  std::string dir_;
};

}  // namespace conflux::testing
