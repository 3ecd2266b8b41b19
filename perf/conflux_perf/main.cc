// conflux-perf: nccl-tests compatible benchmark of Conflux's collectives (with MPI as a baseline).
//   conflux-perf <allreduce|allgather|reducescatter|broadcast|reduce|alltoall|sendrecv> [flags]
//   conflux-perf net [--raw] [--plugin PATH]... [flags]: point-to-point latency and bandwidth (net_options.h)
//   conflux-perf cores [--cores A,B] [--samples N]: how fast two cores hand data to each other (core_probe.h)
// See docs/perf-suite.md. Exit status: 0 all results correct, 1 wrong results or a failure, 2 bad flags.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core_probe.h"
#include "launch.h"
#include "net_options.h"
#include "options.h"

int main(int argc, char** argv) {
  setlinebuf(stdout);
  if (argc > 1 && std::string(argv[1]) == "net") return cfxperf::runNet(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "cores") return cfxperf::runCoreProbe(argc, argv);
  cfxperf::Options opts;
  std::string error;
  switch (cfxperf::parseOptions(argc, argv, &opts, &error)) {
    case cfxperf::ParseStatus::Help:
      std::fputs(cfxperf::usageText("conflux-perf").c_str(), stdout);
      return 0;
    case cfxperf::ParseStatus::Error:
      std::fprintf(stderr, "conflux-perf: %s\n", error.c_str());
      return 2;
    case cfxperf::ParseStatus::Ok:
      break;
  }
  if (opts.explain) {
    // Before any communicator exists (and inherited by forked or re-executed ranks).
    setenv("CONFLUX_DEBUG", "INFO", 1);
    setenv("CONFLUX_DEBUG_SUBSYS", "TUNING", 1);
  }
  return cfxperf::launchAndRun(opts, argc, argv);
}
