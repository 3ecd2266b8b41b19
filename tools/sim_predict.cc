// conflux-sim predict: every algorithm's predicted time for one communicator shape, from the parameters a
// communicator saved (CONFLUX_COST_SAVE) or any CONFLUX_COST_FILE. The same functions the selector calls
// (rankAlgorithms), so the choice printed is the one a communicator with those parameters makes across
// nodes. tests/netns/netns_model_check.py sets every measured run beside these predictions.
#include "tools/sim_predict.h"

#include <getopt.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/cost_model.h"
#include "core/cli_numbers.h"
#include "core/error.h"

namespace conflux {
namespace {

constexpr char kUsage[] =
    "usage: conflux-sim predict --cost-file FILE --nodes N --ranks-per-node L [--bytes 64K,1M,256M]\n"
    "       [--coll allreduce|allgather|reducescatter|broadcast] [--chunk auto|SIZE] [--window W] [--json]\n"
    "       --chunk SIZE (1M by default, as a communicator's): that chunk for every algorithm; auto (as\n"
    "       CONFLUX_CHUNK_BYTES=auto): 1 MiB, the hierarchical all-reduces' chunk chosen per size by the model\n"
    "       --window W (1 by default, as CONFLUX_EXEC_WINDOW's): rounds the executor keeps open; 1: round by round\n"
    "       [--radix K|auto] (2 by default, as CONFLUX_RHD_RADIX's): rhd's largest radix; auto: the model's choice\n"
    "       [--extra-message Q] (the cost file's extra_message, else 0.6): alphas each further message of a\n"
    "       round adds\n";

[[noreturn]] void refuse(const std::string& flag, const std::string& value, const char* takes) {
  std::fprintf(stderr, "conflux-sim: %s: '%s' is not %s\n%s", flag.c_str(), value.c_str(), takes, kUsage);
  std::exit(2);
}

std::vector<uint64_t> parseSizes(const std::string& flag, const std::string& s) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    uint64_t v = 0;
    if (!cli::parseSize(s.substr(pos, comma - pos), &v) || v == 0) refuse(flag, s, "a list of sizes > 0 such as 64K,1M");
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

enum Flag { kCostFile = 256, kNodes, kRanksPerNode, kBytes, kColl, kChunk, kWindow, kRadix, kExtraMessage, kJson, kHelp };
const option kOptions[] = {
    {"cost-file", required_argument, nullptr, kCostFile},
    {"nodes", required_argument, nullptr, kNodes},
    {"ranks-per-node", required_argument, nullptr, kRanksPerNode},
    {"bytes", required_argument, nullptr, kBytes},
    {"coll", required_argument, nullptr, kColl},
    {"chunk", required_argument, nullptr, kChunk},
    {"window", required_argument, nullptr, kWindow},
    {"radix", required_argument, nullptr, kRadix},
    {"extra-message", required_argument, nullptr, kExtraMessage},
    {"json", no_argument, nullptr, kJson},
    {"help", no_argument, nullptr, kHelp},
    {nullptr, 0, nullptr, 0},
};

}  // namespace

int simPredict(int argc, char** argv) {
  std::string costFile;
  std::string collName = "allreduce";
  int nodes = 0, ranksPerNode = 0;
  std::vector<uint64_t> sizes = {uint64_t(1) << 20};
  uint64_t chunkBytes = kPipelineChunkBytes;
  bool chooseChunk = false;
  int windowRounds = kExecWindowRounds;
  int radix = 2;
  bool chooseRadix = false;
  std::optional<double> extraMessage;
  bool json = false;
  opterr = 0;
  optind = 1;
  for (;;) {
    int index = -1;
    const int c = getopt_long(argc, argv, "+:", kOptions, &index);
    if (c == -1) break;
    const std::string flag = index >= 0 ? std::string("--") + kOptions[index].name
                                        : optind > 0 && optind <= argc ? argv[optind - 1] : "?";
    const std::string v = optarg != nullptr ? optarg : "";
    switch (c) {
      case kCostFile: costFile = v; break;
      case kNodes:
        // One node: the selector decides by measured rules there, not by the model.
        if (!cli::parseInt(v, 2, 1 << 20, &nodes)) refuse(flag, v, "a number of nodes >= 2");
        break;
      case kRanksPerNode:
        if (!cli::parseInt(v, 1, 1 << 16, &ranksPerNode)) refuse(flag, v, "a number of ranks >= 1");
        break;
      case kBytes: sizes = parseSizes(flag, v); break;
      case kColl: collName = v; break;
      case kChunk:
        chooseChunk = v == "auto";
        if (!chooseChunk && (!cli::parseSize(v, &chunkBytes) || chunkBytes == 0)) refuse(flag, v, "auto or a size > 0 such as 1M");
        break;
      case kWindow:
        if (!cli::parseInt(v, 1, 4096, &windowRounds)) refuse(flag, v, "a number of rounds from 1 to 4096");
        break;
      case kRadix:
        chooseRadix = v == "auto";
        if (chooseRadix) radix = kMaxRhdRadix;
        else if (!cli::parseInt(v, 2, kMaxRhdRadix, &radix)) refuse(flag, v, "a radix from 2 to 64, or auto");
        break;
      case kExtraMessage: {
        double q = 0;
        if (!cli::parseDouble(v, 0, &q) || q > 1) refuse(flag, v, "a fraction from 0 to 1");
        extraMessage = q;
        break;
      }
      case kJson: json = true; break;
      case kHelp: std::fputs(kUsage, stdout); return 0;
      case ':':
        std::fprintf(stderr, "conflux-sim: %s needs a value\n%s", flag.c_str(), kUsage);
        return 2;
      default:
        std::fprintf(stderr, "conflux-sim: unknown flag %s\n%s", flag.c_str(), kUsage);
        return 2;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "conflux-sim: unexpected argument '%s'\n%s", argv[optind], kUsage);
    return 2;
  }
  if (costFile.empty() || nodes == 0 || ranksPerNode == 0) {
    std::fprintf(stderr, "conflux-sim: predict needs --cost-file, --nodes and --ranks-per-node\n%s", kUsage);
    return 2;
  }
  // The model walks every rank for the trees and rhd: bound the shape (a million ranks take seconds).
  if (int64_t(nodes) * ranksPerNode > kMaxSimRanks) {
    std::fprintf(stderr, "conflux-sim: --nodes x --ranks-per-node: %lld ranks is more than %d\n%s",
                 static_cast<long long>(int64_t(nodes) * ranksPerNode), kMaxSimRanks, kUsage);
    return 2;
  }
  const std::optional<Collective> named = simCollective(collName);
  if (!named) refuse("--coll", collName, "allreduce, allgather, reducescatter or broadcast");
  const Collective coll = *named;

  CostParams p;
  try {
    loadCostFile(costFile, p);
  } catch (const Error& e) {
    std::fprintf(stderr, "conflux-sim: %s\n", e.what());
    return 1;
  }
  p.chunkBytes = chunkBytes;
  p.chooseChunk = chooseChunk;
  p.windowRounds = windowRounds;
  p.radix = radix;
  p.chooseRadix = chooseRadix;
  if (extraMessage) p.extraMessage = *extraMessage;
  CostShape shape;
  shape.nodes = nodes;
  shape.ranksPerNode = ranksPerNode;
  shape.nranks = nodes * ranksPerNode;
  if (!json) {
    std::printf("# %s on %d nodes x %d ranks, parameters from %s (NICs per node: %d, rhd radix %s, extra message %.2g "
                "alpha); predicted microseconds\n",
                collName.c_str(), nodes, ranksPerNode, costFile.c_str(), p.nicsPerNode,
                p.chooseRadix ? "auto" : std::to_string(p.radix).c_str(), p.extraMessage);
  }
  for (uint64_t bytes : sizes) {
    const std::vector<CostedAlgo> ranked = rankAlgorithms(coll, bytes, shape, p);
    if (json) {
      std::printf("{\"bytes\": %llu, \"choice\": \"%s\", \"predicted_us\": {", static_cast<unsigned long long>(bytes),
                  ranked.empty() ? "" : std::string(algoName(ranked[0].algo)).c_str());
      for (size_t i = 0; i < ranked.size(); ++i) {
        std::printf("%s\"%s\": %.6g", i ? ", " : "", std::string(algoName(ranked[i].algo)).c_str(), ranked[i].seconds * 1e6);
      }
      std::printf("}, \"chunk_bytes\": {");
      bool first = true;
      for (const CostedAlgo& c : ranked) {
        if (c.chunkBytes == 0) continue;
        std::printf("%s\"%s\": %llu", first ? "" : ", ", std::string(algoName(c.algo)).c_str(),
                    static_cast<unsigned long long>(c.chunkBytes));
        first = false;
      }
      std::printf("}");
      if (chooseRadix) {  // the radices the model chose, where it chose one
        std::printf(", \"radix\": {");
        first = true;
        for (const CostedAlgo& c : ranked) {
          if (c.radix == 0) continue;
          std::printf("%s\"%s\": %d", first ? "" : ", ", std::string(algoName(c.algo)).c_str(), c.radix);
          first = false;
        }
        std::printf("}");
      }
      std::printf("}\n");
    } else {
      std::printf("%12llu  %-12s", static_cast<unsigned long long>(bytes),
                  ranked.empty() ? "-" : std::string(algoName(ranked[0].algo)).c_str());
      for (const CostedAlgo& c : ranked) {
        std::printf(" %s=%.1f", std::string(algoName(c.algo)).c_str(), c.seconds * 1e6);
        if (c.chunkBytes != 0) std::printf("@%lluK", static_cast<unsigned long long>(c.chunkBytes >> 10));
        if (c.radix != 0) std::printf("/radix%d", c.radix);
      }
      std::printf("\n");
    }
  }
  return 0;
}

}  // namespace conflux
