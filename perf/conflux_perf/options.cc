// conflux-perf: parsing and validating the command line (getopt_long, nccl-tests' short and long names).
#include "options.h"

#include <getopt.h>

#include <climits>

#include "core/cli_numbers.h"
#include "device_memory.h"

namespace cfxperf {

using conflux::cli::parseInt;
using conflux::cli::parseSize;

namespace {

enum LongOnly { kRanks = 1000, kPin, kBackend, kCompare, kExplain, kMemory, kPercentiles, kNoise, kBufferOffset };

const option kLongOptions[] = {
    {"nthreads", required_argument, nullptr, 't'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"iters", required_argument, nullptr, 'n'},
    {"agg_iters", required_argument, nullptr, 'm'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"run_cycles", required_argument, nullptr, 'N'},
    {"parallel_init", required_argument, nullptr, 'p'},
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"stream_null", required_argument, nullptr, 'y'},
    {"timeout", required_argument, nullptr, 'T'},
    {"cudagraph", required_argument, nullptr, 'G'},
    {"report_cputime", required_argument, nullptr, 'C'},
    {"average", required_argument, nullptr, 'a'},
    {"local_register", required_argument, nullptr, 'R'},
    {"output_file", required_argument, nullptr, 'J'},
    {"help", no_argument, nullptr, 'h'},
    {"ranks", required_argument, nullptr, kRanks},
    {"pin", no_argument, nullptr, kPin},
    {"backend", required_argument, nullptr, kBackend},
    {"compare", required_argument, nullptr, kCompare},
    {"explain", no_argument, nullptr, kExplain},
    {"memory", required_argument, nullptr, kMemory},
    {"percentiles", no_argument, nullptr, kPercentiles},
    {"noise", required_argument, nullptr, kNoise},
    {"buffer_offset", required_argument, nullptr, kBufferOffset},
    {nullptr, 0, nullptr, 0},
};
const char kShortOptions[] = "+:t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:a:R:J:h";

std::string flagName(int c) {
  for (const option& o : kLongOptions) {
    if (o.name != nullptr && o.val == c) {
      return c < 256 ? std::string("-") + static_cast<char>(c) + " (--" + o.name + ")"
                     : std::string("--") + o.name;
    }
  }
  return "?";
}

}  // namespace

bool needsMpi(const Options& opts) { return opts.backend == "mpi" || opts.compare == "mpi"; }

bool needsNccl(const Options& opts) { return opts.backend == "nccl" || opts.compare == "nccl"; }

std::string usageText(const char* program) {
  std::string p = program;
  std::string colls;
  for (const CollInfo& c : allColls()) colls += std::string(colls.empty() ? "" : "|") + c.command;
  return "usage: " + p + " <" + colls + "> [flags]\n"
         "       " + p + " net --help     point-to-point latency and bandwidth between two ranks\n"
         "       " + p + " cores --help   how fast two cores hand data to each other now\n"
         "nccl-tests flags (same meaning and defaults):\n"
         "  -b,--minbytes <size>       smallest size (K/M/G suffixes; default 32M)\n"
         "  -e,--maxbytes <size>       largest size (default 32M)\n"
         "  -f,--stepfactor <n>        multiply the size by n each step (default 1: use -i)\n"
         "  -i,--stepbytes <size>      add this to the size each step when -f <= 1 (default 1M)\n"
         "  -n,--iters <n>             timed calls per row (default 20)\n"
         "  -m,--agg_iters <n>         calls per timed iteration, grouped (default 1)\n"
         "  -w,--warmup_iters <n>      warm-up calls at the largest and smallest size (default 5)\n"
         "  -N,--run_cycles <n>        run the size sweep n times (default 1; 0 forever)\n"
         "  -c,--check <n>             check the result n times per row (default 1; 0: #wrong is N/A)\n"
         "  -o,--op <sum|prod|max|min|avg|all>     reduction op (default sum)\n"
         "  -d,--datatype <type|all>   int8 uint8 int32 uint32 int64 uint64 half(float16) float(float32)\n"
         "                             double(float64) bfloat16 (default float)\n"
         "  -r,--root <rank>           root of broadcast and reduce (default 0; -1: every root)\n"
         "  -a,--average <0|1|2|3>     combine ranks' times: 0 rank 0, 1 mean, 2 min, 3 max (default 1)\n"
         "  -z,--blocking <0|1>        barrier after every call (default 0)\n"
         "  -T,--timeout <seconds>     fail a call whose peer is stuck this long (default 0: library's)\n"
         "  -J,--output_file <file>    also write the results as JSON\n"
         "  -R,--local_register <0|1>  1: buffers from cfxMemAlloc, registered (peers map them: no staging)\n"
         "  -C,--report_cputime <0|1>  label the time column cputime (same clock for host calls)\n"
         "  -t,--nthreads 1  -g,--ngpus 1  -p,--parallel_init <0|1>  -y,--stream_null <0|1>  -G,--cudagraph 0\n"
         "                             accepted for compatibility (only these values)\n"
         "conflux-perf flags:\n"
         "  --ranks <n>                fork n local ranks (default: ranks from the launcher, else 1)\n"
         "  --pin                      pin rank r to core r % cores\n"
         "  --backend <conflux|mpi|nccl>  library under test (default conflux; nccl needs --memory cuda)\n"
         "  --compare <mpi|nccl>       run MPI or NCCL on the same sizes and add its time, busbw and the ratio\n"
         "  --memory <host|cuda>       where the buffers live (default host); cuda: one GPU per rank\n"
         "                             (local rank % devices), calls ordered on a stream; exit 77 without a GPU\n"
         "  --explain                  rank 0 logs each size's algorithm choice: the candidates, their predicted\n"
         "                             times (across nodes) and the reason (CONFLUX_DEBUG=INFO, subsystem TUNING)\n"
         "  --percentiles              time every iteration too: p50, p99 and max per call (us), appended after\n"
         "                             the other columns, and in -J (an iteration's time is its slowest rank's)\n"
         "  --noise <n>                n CPU-bound processes (unpinned) compete with the ranks for the cores\n"
         "                             while the sweep runs: a noisy neighbour (0..256, default 0)\n"
         "  --buffer_offset <bytes>    send and receive buffers start this far into a page, as malloc's large\n"
         "                             blocks do (16 with glibc); a multiple of 8 up to 4088, host memory;\n"
         "                             default 0: page-aligned\n"
         "  -h,--help                  this text\n";
}

ParseStatus parseOptions(int argc, char** argv, Options* opts, std::string* error) {
  for (int i = 0; i < argc; ++i) opts->argv.emplace_back(argv[i]);
  if (argc < 2) {
    *error = "missing the collective (the first argument); see --help";
    return ParseStatus::Error;
  }
  std::string sub = argv[1];
  if (sub == "-h" || sub == "--help") return ParseStatus::Help;
  if (!parseColl(sub, &opts->coll)) {
    *error = "unknown collective '" + sub + "'; see --help";
    return ParseStatus::Error;
  }
  opts->ops = {cfxSum};
  opts->types = {cfxFloat32};
  // getopt_long sees the subcommand as the program name.
  int subArgc = argc - 1;
  char** subArgv = argv + 1;
  optind = 1;
  opterr = 0;
  for (;;) {
    int c = getopt_long(subArgc, subArgv, kShortOptions, kLongOptions, nullptr);
    if (c == -1) break;
    auto bad = [&](const std::string& expected) {
      *error = "invalid value '" + std::string(optarg ? optarg : "") + "' for " + flagName(c) + ": expected " +
               expected;
      return ParseStatus::Error;
    };
    int v = 0;
    switch (c) {
      case 't': case 'g':
        if (!parseInt(optarg, 1, 1, &v)) return bad("1 (one rank per process; start more ranks with --ranks)");
        break;
      case 'p': case 'y':
        if (!parseInt(optarg, 0, 1, &v)) return bad("0 or 1");
        break;
      case 'G':
        if (!parseInt(optarg, 0, 0, &v)) return bad("0 (no CUDA graph capture)");
        break;
      case 'b':
        if (!parseSize(optarg, &opts->minBytes)) return bad("a size such as 8, 64K, 32M or 1G");
        break;
      case 'e':
        if (!parseSize(optarg, &opts->maxBytes)) return bad("a size such as 8, 64K, 32M or 1G");
        break;
      case 'i':
        if (!parseSize(optarg, &opts->stepBytes)) return bad("a size such as 1M");
        break;
      case 'f':
        if (!parseInt(optarg, 0, INT_MAX, &v)) return bad("an integer >= 0");
        opts->stepFactor = static_cast<size_t>(v);
        break;
      case 'n':
        if (!parseInt(optarg, 1, INT_MAX, &opts->iters)) return bad("an integer >= 1");
        break;
      case 'm':
        if (!parseInt(optarg, 1, INT_MAX, &opts->aggIters)) return bad("an integer >= 1");
        break;
      case 'w':
        if (!parseInt(optarg, 0, INT_MAX, &opts->warmup)) return bad("an integer >= 0");
        break;
      case 'N':
        if (!parseInt(optarg, 0, INT_MAX, &opts->runCycles)) return bad("an integer >= 0");
        break;
      case 'c':
        if (!parseInt(optarg, 0, INT_MAX, &opts->check)) return bad("an integer >= 0");
        break;
      case 'o': {
        std::string s = optarg;
        cfxRedOp_t op;
        if (s == "all") {
          opts->ops = allOps();
        } else if (parseOp(s, &op)) {
          opts->ops = {op};
        } else {
          return bad(s == "mulsum" ? "sum, prod, max, min, avg, band, bor, bxor or all (conflux-perf does not "
                                     "measure nccl-tests' mulsum)"
                                   : "sum, prod, max, min, avg, band, bor, bxor or all");
        }
        break;
      }
      case 'd': {
        std::string s = optarg;
        cfxDataType_t type;
        if (s == "all") {
          opts->types = allTypes();
        } else if (parseType(s, &type)) {
          opts->types = {type};
        } else {
          return bad("int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16 or all");
        }
        break;
      }
      case 'r':
        if (!parseInt(optarg, -1, INT_MAX, &opts->root)) return bad("a rank >= 0, or -1 for every root");
        break;
      case 'z':
        if (!parseInt(optarg, 0, 1, &opts->blocking)) return bad("0 or 1");
        break;
      case 'T':
        if (!parseInt(optarg, 0, INT_MAX / 1000, &opts->timeoutSec)) return bad("seconds >= 0");
        break;
      case 'C':
        if (!parseInt(optarg, 0, 1, &opts->reportCputime)) return bad("0 or 1");
        break;
      case 'a':
        if (!parseInt(optarg, 0, 3, &opts->average)) return bad("0 (rank 0), 1 (mean), 2 (min) or 3 (max)");
        break;
      case 'R':
        if (!parseInt(optarg, 0, 1, &opts->localRegister)) return bad("0 or 1");
        break;
      case 'J':
        opts->jsonPath = optarg;
        if (opts->jsonPath.empty()) return bad("a file name");
        break;
      case 'h':
        return ParseStatus::Help;
      case kRanks:
        if (!parseInt(optarg, 1, 4096, &opts->ranks)) return bad("a number of ranks, 1..4096");
        break;
      case kPin:
        opts->pin = true;
        break;
      case kBackend:
        opts->backend = optarg;
        if (opts->backend != "conflux" && opts->backend != "mpi" && opts->backend != "nccl") {
          return bad("conflux, mpi or nccl");
        }
        break;
      case kCompare:
        opts->compare = optarg;
        if (opts->compare != "mpi" && opts->compare != "nccl") return bad("mpi or nccl");
        break;
      case kMemory: {
        const std::string m = optarg;
        if (m == "host") {
          opts->memory = Memory::Host;
        } else if (m == "cuda") {
          if (!cudaBuilt()) {
            *error = "--memory cuda needs a build with CUDA (CONFLUX_HAVE_CUDA); this conflux-perf has none";
            return ParseStatus::Error;
          }
          opts->memory = Memory::Cuda;
        } else {
          return bad("host or cuda");
        }
        break;
      }
      case kExplain:
        opts->explain = true;
        break;
      case kPercentiles:
        opts->percentiles = true;
        break;
      case kNoise:
        if (!parseInt(optarg, 0, 256, &opts->noise)) return bad("a number of processes, 0..256");
        break;
      case kBufferOffset:
        if (!parseInt(optarg, 0, 4088, &opts->bufferOffset) || opts->bufferOffset % 8 != 0) {
          return bad("a byte offset into a page, a multiple of 8 (every element stays aligned), 0..4088");
        }
        break;
      case ':':
        *error = std::string("missing value after ") + subArgv[optind - 1] + "; see --help";
        return ParseStatus::Error;
      default:
        *error = std::string("unknown flag '") + subArgv[optind - 1] + "'; see --help";
        return ParseStatus::Error;
    }
  }
  if (optind < subArgc) {
    *error = std::string("unexpected argument '") + subArgv[optind] + "'; see --help";
    return ParseStatus::Error;
  }
  if (opts->minBytes > opts->maxBytes) {
    *error = "invalid sizes: -b " + std::to_string(opts->minBytes) + " is larger than -e " +
             std::to_string(opts->maxBytes);
    return ParseStatus::Error;
  }
  if (opts->stepFactor <= 1 && opts->stepBytes == 0 && opts->minBytes < opts->maxBytes) {
    *error = "-i 0 with -f <= 1 would never reach -e; give -f > 1 or -i > 0";
    return ParseStatus::Error;
  }
  if (opts->stepFactor > 1 && opts->minBytes == 0 && opts->maxBytes > 0) {
    *error = "-b 0 with -f > 1 would never grow; give -b > 0";
    return ParseStatus::Error;
  }
  if (opts->backend == "mpi" && opts->compare == "mpi") {
    *error = "--backend mpi with --compare mpi compares MPI with itself; use one of them";
    return ParseStatus::Error;
  }
  if (opts->backend == "nccl" && opts->compare == "nccl") {
    *error = "--backend nccl with --compare nccl compares NCCL with itself; use one of them";
    return ParseStatus::Error;
  }
  if (needsNccl(*opts) && opts->memory != Memory::Cuda) {
    *error = std::string(opts->backend == "nccl" ? "--backend nccl" : "--compare nccl") +
             " needs --memory cuda (NCCL runs on CUDA device buffers)";
    return ParseStatus::Error;
  }
  if (needsMpi(*opts) && opts->memory == Memory::Cuda) {
    *error = std::string(opts->backend == "mpi" ? "--backend mpi" : "--compare mpi") +
             " runs on host buffers only; --memory cuda works with --backend conflux or nccl and --compare nccl";
    return ParseStatus::Error;
  }
  if (opts->bufferOffset != 0 && opts->memory == Memory::Cuda) {
    *error = "--buffer_offset is for host memory (malloc's layout); with --memory cuda leave it out";
    return ParseStatus::Error;
  }
  if (opts->localRegister != 0 && opts->memory == Memory::Cuda) {
    *error = "-R 1 allocates host memory with cfxMemAlloc and registers it; with --memory cuda leave it out";
    return ParseStatus::Error;
  }
  const CollInfo& info = collInfo(opts->coll);
  if (opts->root == -1 && !info.hasRoot) opts->root = 0;  // nccl-tests ignores -r here
  if (!info.hasOp) opts->ops = {cfxSum};                    // and runs such collectives once
  return ParseStatus::Ok;
}

}  // namespace cfxperf
