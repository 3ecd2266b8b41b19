// conflux-perf cores: how fast two cores of this machine hand data to each other, right now.
//
// On a virtual machine the host decides where the guest's vCPUs run, and moves them: two vCPUs on
// sibling hyperthreads, on two cores of one cache complex, or on different complexes hand a cache line
// to each other in about 50, 110 or 530 ns here (measured 2026-12-06), and every shared-memory
// collective (Conflux's staging, MPI's) slows down with it, up to 7x for a 1 MiB all-reduce. A run of a
// benchmark lands in whatever placement the host chose then, so reports measure it next to each run
// (tools/perf_report.sh) and users can check it before they trust a number (docs/performance-method.md).
//
//   conflux-perf cores [--cores A,B] [--samples N]
// Two threads pinned to cores A and B (default 0 and 1) ping-pong one cache line (round trip), then
// hand over 1 MiB (written on A, copied on B): N samples each (default 9), median, min and max.
#pragma once

namespace cfxperf {

/// Runs `conflux-perf cores ...` (argv[1] == "cores"); returns the exit status.
int runCoreProbe(int argc, char** argv);

}  // namespace cfxperf
