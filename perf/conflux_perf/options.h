// conflux-perf: command-line options. nccl-tests' flags with their meanings and defaults, plus
// conflux-perf's own (--ranks, --pin, --backend, --compare, --memory). Parsing validates everything it can
// before any rank starts, so a bad flag is one clear message and exit status 2.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "collectives.h"

namespace cfxperf {

/// Where the benchmark's buffers live (--memory).
enum class Memory { Host, Cuda };

struct Options {
  Coll coll = Coll::AllReduce;
  // nccl-tests flags (defaults are nccl-tests' own).
  size_t minBytes = 32u << 20;   ///< -b
  size_t maxBytes = 32u << 20;   ///< -e
  size_t stepBytes = 1u << 20;   ///< -i (used when stepFactor <= 1)
  size_t stepFactor = 1;         ///< -f
  int iters = 20;                ///< -n
  int aggIters = 1;              ///< -m
  int warmup = 5;                ///< -w
  int runCycles = 1;             ///< -N (0: forever)
  int check = 1;                 ///< -c: check iterations per row (0: no check, #wrong is N/A)
  std::vector<cfxRedOp_t> ops;   ///< -o (default sum; all: sum prod max min avg)
  std::vector<cfxDataType_t> types;  ///< -d (default float; all: every type)
  int root = 0;                  ///< -r (-1: every root, for broadcast and reduce)
  int blocking = 0;              ///< -z: barrier after every call
  int timeoutSec = 0;            ///< -T: a stuck peer fails the call after this many seconds
  int average = 1;               ///< -a: 0 rank 0, 1 mean, 2 min, 3 max of the ranks' times
  int localRegister = 0;         ///< -R: 1 allocates buffers with cfxMemAlloc and registers them
  int reportCputime = 0;         ///< -C: label the time column "cputime" (host calls: the same clock)
  std::string jsonPath;          ///< -J
  // conflux-perf flags.
  int ranks = 0;                 ///< --ranks: fork this many local ranks (0: use the launcher)
  bool pin = false;              ///< --pin: rank r runs on core r % cores
  std::string backend = "conflux";  ///< --backend conflux|mpi|nccl
  std::string compare;           ///< --compare mpi|nccl (empty: no comparison)
  Memory memory = Memory::Host;  ///< --memory host|cuda
  bool explain = false;          ///< --explain: the library logs its algorithm choices (rank 0, once per size)
  bool percentiles = false;      ///< --percentiles: time every iteration; p50, p99 and max columns
  int noise = 0;                 ///< --noise: this many CPU-bound processes compete with the ranks
  int bufferOffset = 0;          ///< --buffer_offset: bytes into a page where send and recv start
  std::vector<std::string> argv; ///< the command line as given
};

enum class ParseStatus { Ok, Help, Error };

/// Parses argv (argv[1] is the subcommand). On Error, *error holds the message to print.
ParseStatus parseOptions(int argc, char** argv, Options* opts, std::string* error);

/// The usage text (printed by -h).
std::string usageText(const char* program);

/// True when the MPI backend is needed in this process (--backend mpi or --compare mpi).
bool needsMpi(const Options& opts);

/// True when the NCCL backend is used (--backend nccl or --compare nccl).
bool needsNccl(const Options& opts);

/// Exit status of a run that could not measure anything because there is no CUDA device (--memory cuda).
constexpr int kExitSkipped = 77;

}  // namespace cfxperf
