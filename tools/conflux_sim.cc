// conflux-sim: scale projections from the cost model (algorithms/cost_model.h) on topology fixtures, and
// (`predict`, tools/sim_predict.cc) every algorithm's time from a communicator's saved parameters.
//
//   conflux-sim project --topo FILE.json [--nodes 1,2,4,...] [--bytes 1G] [--markdown]
//                       [--intra-gbytes G] [--intra-alpha-us A] [--inter-alpha-us A] [--reduce-gbytes G]
//                       [--inter-gbytes G] [--ranks-per-node L] [--chunk auto|4M] [--window W] [--time]
//                       [--coll allreduce|allgather|reducescatter|broadcast] [--radix K|auto] [--extra-message Q]
//
// One rank per GPU (or, without GPUs, per NUMA node). The network: every rail NIC of the topology
// (core/topology/nic_assignment.h) at its link speed, derated by kNicEfficiency, alpha --inter-alpha-us.
// Inside the node: per-GPU NVLink bandwidth from the GPU model (table below; --intra-gbytes overrides),
// or the defaults of CostParams without GPUs. For each node count it prints each algorithm's predicted
// time and bus bandwidth of the collective (all-reduce unless --coll says otherwise; busbw as nccl-tests
// defines it: bytes / time * 2(n-1)/n for all-reduce, (n-1)/n for all-gather and reduce-scatter, 1 for
// broadcast) and the one the selector would pick. docs/projections.md compares the output with published NCCL figures.
#include <getopt.h>

#include <algorithm>
#include <cmath>
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
#include "core/topology/nic_assignment.h"
#include "core/topology/topology_json.h"
#include "tools/sim_predict.h"

namespace {

using namespace conflux;

// Fraction of a NIC's line rate a transport moves in practice (EFA ~ 90% of line rate in published runs).
constexpr double kNicEfficiency = 0.9;

struct GpuLink {
  const char* match;     // substring of the GPU name
  double nvlinkGBytes;   // per GPU, one direction
  double reduceGBytes;   // bytes of input reduced per second (HBM-bound kernel: read two, write one)
};
// NVLink per GPU per direction: A100 12 links x 25 GB/s, H100/H200 18 x 25 GB/s. Reduction: a third of
// HBM bandwidth (1.6 TB/s A100-40GB, 3.35 TB/s H100 SXM, 4.8 TB/s H200) per input byte, roughly.
constexpr GpuLink kGpus[] = {
    {"A100", 300, 530},
    {"H100", 450, 1100},
    {"H200", 450, 1600},
};

constexpr char kUsage[] =
    "usage: conflux-sim project --topo FILE.json [--nodes 1,2,4] [--bytes 1G] [--markdown]\n"
    "       [--intra-gbytes G] [--intra-alpha-us A] [--inter-alpha-us A] [--reduce-gbytes G]\n"
    "       [--inter-gbytes G (per NIC)] [--ranks-per-node L] [--chunk auto|4M] [--time (us, not busbw)]\n"
    "       --chunk SIZE: that chunk for every algorithm (4M by default); auto: 4 MiB, the hierarchical\n"
    "       all-reduces' chunk chosen per size by the model (shown beside the choice)\n"
    "       [--coll allreduce|allgather|reducescatter|broadcast] [--window W (1, round by round; as CONFLUX_EXEC_WINDOW)]\n"
    "       [--radix K|auto (rhd's largest radix, as CONFLUX_RHD_RADIX; 2)] [--extra-message Q (alphas each further\n"
    "       message of a round adds; 0.6, measured here; 0: latencies overlap)]\n"
    "       conflux-sim predict --cost-file FILE --nodes N --ranks-per-node L [--bytes 64K,1M,256M]\n"
    "       [--coll allreduce|allgather|reducescatter|broadcast] [--chunk auto|1M] [--window W]\n"
    "       [--radix K|auto] [--extra-message Q (default: the cost file's, else 0.6)] [--json]\n";

[[noreturn]] void usage() {
  std::fputs(kUsage, stderr);
  std::exit(2);
}

/// A refused command line: says which flag and what it takes, then the usage; exit status 2.
[[noreturn]] void bad(const std::string& flag, const std::string& value, const char* takes) {
  std::fprintf(stderr, "conflux-sim: %s: '%s' is not %s\n%s", flag.c_str(), value.c_str(), takes, kUsage);
  std::exit(2);
}

std::vector<int> parseList(const std::string& flag, const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    int v = 0;
    if (!cli::parseInt(s.substr(pos, comma - pos), 1, 1 << 24, &v)) {
      bad(flag, s, "a list of node counts >= 1, such as 1,2,4");
    }
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

enum Flag {
  kTopo = 256, kNodes, kBytes, kMarkdown, kIntraGBytes, kIntraAlpha, kInterAlpha, kReduceGBytes, kInterGBytes,
  kRanksPerNode, kTime, kChunk, kColl, kWindow, kRadix, kExtraMessage, kHelp,
};
const option kOptions[] = {
    {"topo", required_argument, nullptr, kTopo},
    {"nodes", required_argument, nullptr, kNodes},
    {"bytes", required_argument, nullptr, kBytes},
    {"markdown", no_argument, nullptr, kMarkdown},
    {"intra-gbytes", required_argument, nullptr, kIntraGBytes},
    {"intra-alpha-us", required_argument, nullptr, kIntraAlpha},
    {"inter-alpha-us", required_argument, nullptr, kInterAlpha},
    {"reduce-gbytes", required_argument, nullptr, kReduceGBytes},
    {"inter-gbytes", required_argument, nullptr, kInterGBytes},
    {"ranks-per-node", required_argument, nullptr, kRanksPerNode},
    {"time", no_argument, nullptr, kTime},
    {"chunk", required_argument, nullptr, kChunk},
    {"window", required_argument, nullptr, kWindow},
    {"coll", required_argument, nullptr, kColl},
    {"radix", required_argument, nullptr, kRadix},
    {"extra-message", required_argument, nullptr, kExtraMessage},
    {"help", no_argument, nullptr, kHelp},
    {nullptr, 0, nullptr, 0},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "predict") == 0) return simPredict(argc - 1, argv + 1);
  if (argc < 2 || std::strcmp(argv[1], "project") != 0) usage();
  std::string topoFile;
  std::string collName = "allreduce";
  std::vector<int> nodeCounts = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  uint64_t bytes = uint64_t(1) << 30;
  bool markdown = false;
  double intraGBytes = 0, intraAlphaUs = 3, interAlphaUs = 20, reduceGBytes = 0, interGBytes = 0;
  int ranksOverride = 0;
  bool showTime = false;
  uint64_t chunkBytes = 4 << 20;
  bool chooseChunk = false;
  int windowRounds = kExecWindowRounds;
  int radix = 2;
  bool chooseRadix = false;
  double extraMessage = CostParams{}.extraMessage;
  // getopt_long sees the subcommand as the program name.
  opterr = 0;
  optind = 1;
  const int subArgc = argc - 1;
  char** subArgv = argv + 1;
  for (;;) {
    int index = -1;
    const int c = getopt_long(subArgc, subArgv, "+:", kOptions, &index);
    if (c == -1) break;
    const std::string flag = index >= 0 ? std::string("--") + kOptions[index].name
                                        : optind > 0 && optind <= subArgc ? subArgv[optind - 1] : "?";
    const std::string v = optarg != nullptr ? optarg : "";
    auto nonNegative = [&](double* out, const char* takes) {
      if (!cli::parseDouble(v, 0, out)) bad(flag, v, takes);
    };
    auto size = [&](uint64_t* out) {
      if (!cli::parseSize(v, out) || *out == 0) bad(flag, v, "a size > 0 such as 64K, 4M or 1G");
    };
    switch (c) {
      case kTopo: topoFile = v; break;
      case kNodes: nodeCounts = parseList(flag, v); break;
      case kBytes: size(&bytes); break;
      case kMarkdown: markdown = true; break;
      case kIntraGBytes: nonNegative(&intraGBytes, "a bandwidth in GB/s (0: the default)"); break;
      case kIntraAlpha: nonNegative(&intraAlphaUs, "a latency in microseconds >= 0"); break;
      case kInterAlpha: nonNegative(&interAlphaUs, "a latency in microseconds >= 0"); break;
      case kReduceGBytes: nonNegative(&reduceGBytes, "a bandwidth in GB/s (0: the default)"); break;
      case kInterGBytes: nonNegative(&interGBytes, "a bandwidth in GB/s (0: the default)"); break;
      case kRanksPerNode:
        if (!cli::parseInt(v, 1, 1 << 16, &ranksOverride)) bad(flag, v, "a number of ranks >= 1");
        break;
      case kTime: showTime = true; break;
      case kChunk:
        chooseChunk = v == "auto";
        if (!chooseChunk) size(&chunkBytes);
        break;
      case kColl: collName = v; break;
      case kWindow:
        if (!cli::parseInt(v, 1, 4096, &windowRounds)) bad(flag, v, "a number of rounds from 1 to 4096");
        break;
      case kRadix:
        chooseRadix = v == "auto";
        if (chooseRadix) radix = kMaxRhdRadix;
        else if (!cli::parseInt(v, 2, kMaxRhdRadix, &radix)) bad(flag, v, "a radix from 2 to 64, or auto");
        break;
      case kExtraMessage:
        if (!cli::parseDouble(v, 0, &extraMessage) || extraMessage > 1) bad(flag, v, "a fraction from 0 to 1");
        break;
      case kHelp: std::fputs(kUsage, stdout); return 0;
      case ':':
        std::fprintf(stderr, "conflux-sim: %s needs a value\n%s", flag.c_str(), kUsage);
        return 2;
      default:
        std::fprintf(stderr, "conflux-sim: unknown flag %s\n%s", flag.c_str(), kUsage);
        return 2;
    }
  }
  if (optind < subArgc) {
    std::fprintf(stderr, "conflux-sim: unexpected argument '%s'\n%s", subArgv[optind], kUsage);
    return 2;
  }
  if (topoFile.empty()) {
    std::fprintf(stderr, "conflux-sim: --topo FILE.json is required\n%s", kUsage);
    return 2;
  }
  const std::optional<Collective> named = simCollective(collName);
  if (!named) bad("--coll", collName, "allreduce, allgather, reducescatter or broadcast");
  const Collective coll = *named;
  try {
    const topo::Machine m = topo::loadFile(topoFile);
    const std::vector<int> rails = topo::railNics(m);
    CostParams p;
    p.source = "conflux-sim";
    p.chunkBytes = chunkBytes;
    p.chooseChunk = chooseChunk;
    p.windowRounds = windowRounds;
    p.radix = radix;
    p.chooseRadix = chooseRadix;
    p.extraMessage = extraMessage;
    p.nicsPerNode = std::max<int>(1, int(rails.size()));
    double nicGbps = 0;
    for (int r : rails) nicGbps = std::max(nicGbps, m.nics[size_t(r)].speedGbps);
    if (nicGbps <= 0) nicGbps = 100;
    p.inter = {interAlphaUs * 1e-6, nicGbps / 8 * 1e9 * kNicEfficiency};
    p.intra.alpha = intraAlphaUs * 1e-6;
    int ranksPerNode = int(m.gpus.size());
    std::string intraWhat = "defaults (shared memory)";
    if (ranksPerNode > 0) {
      for (const GpuLink& g : kGpus) {
        if (m.gpus[0].name.find(g.match) != std::string::npos) {
          p.intra.bandwidth = g.nvlinkGBytes * 1e9;
          p.reduceRate = g.reduceGBytes * 1e9;
          p.fusedReduce = true;  // the reduction kernels read, reduce and write in one pass over HBM
          intraWhat = std::string("NVLink of ") + g.match;
        }
      }
    } else {
      ranksPerNode = std::max<int>(1, int(m.numa.size()));
    }
    if (intraGBytes > 0) p.intra.bandwidth = intraGBytes * 1e9;
    if (interGBytes > 0) p.inter.bandwidth = interGBytes * 1e9;
    if (ranksOverride > 0) ranksPerNode = ranksOverride;
    if (reduceGBytes > 0) p.reduceRate = reduceGBytes * 1e9;

    std::printf("%s%s: %d ranks per node; %d rail NICs x %.0f Gbit/s (x%.2f), alpha %.0f us; intra %s %.0f GB/s, "
                "alpha %.0f us; reduce %.0f GB/s; %llu bytes\n",
                markdown ? "" : "# ", topoFile.c_str(), ranksPerNode, p.nicsPerNode, nicGbps, kNicEfficiency, interAlphaUs,
                intraWhat.c_str(), p.intra.bandwidth / 1e9, intraAlphaUs, p.reduceRate / 1e9, (unsigned long long)bytes);
    const std::vector<Algo> algos = {Algo::Ring, Algo::RecHalvingDoubling, Algo::BinomialTree, Algo::DoubleBinaryTree,
                                     Algo::Hierarchical, Algo::HierarchicalRhd, Algo::HierarchicalDbtree};
    if (markdown) {
      std::printf("\n| nodes | ranks |");
      for (Algo a : algos) std::printf(" %s |", std::string(algoName(a)).c_str());
      std::printf(" choice |\n|---|---|");
      for (size_t i = 0; i < algos.size(); ++i) std::printf("---|");
      std::printf("---|\n");
    } else {
      std::printf("%6s %6s", "nodes", "ranks");
      for (Algo a : algos) std::printf(" %10s", std::string(algoName(a)).c_str());
      std::printf("  choice   (busbw GB/s)\n");
    }
    for (int nodes : nodeCounts) {
      if (int64_t(nodes) * ranksPerNode > kMaxSimRanks) {  // the model walks every rank
        std::fprintf(stderr, "conflux-sim: --nodes: %d nodes of %d ranks is more than %d ranks\n", nodes, ranksPerNode,
                     kMaxSimRanks);
        return 2;
      }
    }
    for (int nodes : nodeCounts) {
      CostShape sh;
      sh.nodes = nodes;
      sh.ranksPerNode = ranksPerNode;
      sh.nranks = nodes * ranksPerNode;
      const double n = sh.nranks;
      const double factor = coll == Collective::Broadcast ? 1.0
                            : coll == Collective::AllReduce ? 2.0 * (n - 1) / n
                                                            : (n - 1) / n;
      std::printf(markdown ? "| %d | %d |" : "%6d %6d", nodes, sh.nranks);
      for (Algo a : algos) {
        const double t = bestSettings(a, coll, bytes, sh, p).seconds;
        if (t <= 0) std::printf(markdown ? " – |" : " %10s", "-");
        else if (showTime) std::printf(markdown ? " %.0f |" : " %10.0f", t * 1e6);
        else std::printf(markdown ? " %.0f |" : " %10.1f", double(bytes) / t * std::max(factor, 1e-9) / 1e9);
      }
      const auto ranked = rankAlgorithms(coll, bytes, sh, p);
      std::string choice = ranked.empty() ? "-" : std::string(algoName(ranked[0].algo));
      if (!ranked.empty() && ranked[0].chunkBytes != 0) choice += " (" + chunkText(ranked[0].chunkBytes) + ")";
      if (!ranked.empty() && ranked[0].radix != 0) choice += " (radix " + std::to_string(ranked[0].radix) + ")";
      std::printf(markdown ? " %s |\n" : "  %s\n", choice.c_str());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "conflux-sim: %s\n", e.what());
    return 1;
  }
  return 0;
}
