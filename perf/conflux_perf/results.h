// conflux-perf: the plain records the benchmark produces and the text and JSON reports consume.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "options.h"

namespace cfxperf {

/// One measurement: a backend, a size, out of place or in place.
struct PlaceResult {
  bool ran = false;      ///< false: the backend does not support this call (see RowResult::mpiSkipped)
  double timeUs = 0;     ///< time per call, combined over ranks per -a
  double algbw = 0;      ///< GB/s (1e9 bytes per second)
  double busbw = 0;      ///< GB/s
  int64_t wrong = -1;    ///< wrong elements summed over ranks; -1 when not checked (-c 0)
  /// --percentiles: over the timed iterations, the time of one call (an iteration's calls / -m), each
  /// iteration's time the largest over ranks (nearest rank: p50 the ceil(0.5 n)-th smallest, p99 the
  /// ceil(0.99 n)-th, so below -n 100 p99 is the max); 0 when not recorded.
  double p50Us = 0;
  double p99Us = 0;
  double maxUs = 0;
};

/// One output row: nccl-tests' columns, plus MPI's when comparing.
struct RowResult {
  size_t bytes = 0;      ///< nccl-tests' size column: max(send, recv) bytes per rank
  size_t count = 0;      ///< nccl-tests' count column: the call's count argument
  cfxDataType_t type = cfxFloat32;
  std::string redop;     ///< op name, or "none"
  int root = -1;
  PlaceResult main[2];   ///< [0] out of place, [1] in place (the benchmarked backend)
  bool compared = false;
  PlaceResult mpi[2];    ///< MPI on the same calls, when comparing
  std::string mpiSkipped;  ///< why MPI did not run this row, when it did not
};

/// One rank's "device": its process, host and cores, and its GPU with --memory cuda.
struct DeviceLine {
  int rank = 0;
  int pid = 0;
  int localRank = 0;
  std::string host;
  std::string cores;
  int gpu = -1;          ///< CUDA device index; -1 for host memory
  std::string gpuName;   ///< "NVIDIA H200"
  std::string busId;     ///< "0000:1b:00.0"
};

/// What the header describes.
struct RunInfo {
  const Options* opts = nullptr;
  int nranks = 1;
  std::string launch;       ///< "fork", "mpirun", "launcher", "mpi" or "single"
  std::vector<std::string> backends;  ///< benchmarked backend first, then the comparison
  std::vector<std::string> backendVersions;  ///< Backend::version() of each ("" where none)
  std::vector<DeviceLine> devices;
  std::string cpuModel;
  int cores = 1;
  std::string commandLine;  ///< as the user typed it (before any mpirun re-execution)
};

/// What the footer sums up.
struct Summary {
  int errors = 0;           ///< (rank, row, place) results with wrong elements, as nccl-tests counts
  double avgBusbw = 0;      ///< mean busbw over every row, out of place and in place
  double minBusbw = -1;     ///< NCCL_TESTS_MIN_BW (as nccl-tests): fail below 90% of it; -1 when unset
  int mpiErrors = 0;
  double mpiAvgBusbw = 0;
  double ratioGeomean = 0;  ///< geometric mean of conflux busbw / MPI busbw over rows both ran
};

}  // namespace cfxperf
