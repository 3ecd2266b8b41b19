// conflux-perf: nccl-tests compatible benchmark of Conflux's collectives (with MPI as a baseline).
//   conflux-perf <allreduce|allgather|reducescatter|broadcast|reduce|alltoall|sendrecv> [flags]
// See docs/perf-suite.md. Exit status: 0 all results correct, 1 wrong results or a failure, 2 bad flags.
#include <cstdio>
#include <string>

#include "launch.h"
#include "options.h"

int main(int argc, char** argv) {
  setlinebuf(stdout);
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
  return cfxperf::launchAndRun(opts, argc, argv);
}
