// The cost model: predicted time of each algorithm's schedule from alpha-beta-gamma parameters per link
// class (inside a node: shared memory or NVLink; between nodes: the network), so that the selector can
// pick the cheapest plan and explain why, and so that scale projections can run on topology fixtures.
//
// A link class has a latency alpha (seconds per message step) and a bandwidth (bytes per second per
// rank, one direction); the network's bandwidth is per NIC, shared by the local ranks that drive it at
// the same time. gamma is the reduction rate (bytes reduced per second per rank). Each algorithm's time
// is the sum of its steps, a step lasting as long as its slowest transfer; docs/cost-model.md derives
// each formula from the schedule in the algorithm's file.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "core/types.h"

namespace conflux {

/// One link class.
struct LinkCost {
  double alpha = 0;        ///< seconds per message step (latency, software overhead included)
  double bandwidth = 0;    ///< bytes per second, one direction (per rank inside a node, per NIC between)

  double time(double bytes, double share = 1) const { return alpha + bytes * share / bandwidth; }
};

/// Parameters of the model. Defaults: this project's 2-core VM (docs/cost-model.md, calibration).
struct CostParams {
  LinkCost intra{3e-6, 5e9};   ///< shared memory between two ranks of a node
  LinkCost inter{50e-6, 2e9};  ///< one NIC between nodes
  double reduceRate = 8e9;     ///< bytes per second one rank reduces (two inputs into one output)
  bool fusedReduce = false;    ///< reductions overlap the transfers (GPU kernels reduce as they copy): free
  int nicsPerNode = 1;         ///< NICs a node's ranks drive (rails); min(L, this) run in parallel
  uint64_t chunkBytes = kPipelineChunkBytes;  ///< pipelining chunk of the message-passing plans
  int radix = 2;  ///< largest radix of recursive halving-doubling (PlanParams::radix, CONFLUX_RHD_RADIX)
  /// Recursive halving-doubling's radix is the model's choice per call (bestSettings: from 2 up to `radix`)
  /// rather than `radix` itself (CONFLUX_RHD_RADIX=auto).
  bool chooseRadix = false;
  /// What each further message of a round to another peer adds, in alphas: a step of recursive
  /// halving-doubling of radix r sends r - 1 messages at once and pays alpha x (1 + (r - 2) x this).
  /// 1: they queue one after another; 0: their latencies overlap. Measured 0.6 here (4 ranks on the
  /// 2-core VM, tcp and ofi: docs/cost-model.md, "Radix"); 1 outside the radix exchanges.
  double extraMessage = 0.6;
  /// The hierarchical all-reduces' chunk is the model's choice per call (bestChunk) rather than chunkBytes
  /// (communicators do so unless CONFLUX_CHUNK_BYTES is set).
  bool chooseChunk = false;
  /// Rounds the executor keeps open at once (CONFLUX_EXEC_WINDOW): 1 runs plans round by round, more
  /// lets a hierarchical segment's steps follow each other as their inputs arrive.
  int windowRounds = kExecWindowRounds;
  std::string source = "defaults";  ///< where the numbers came from ("probe", a file, "defaults")
};

/// The communicator shape the model needs.
struct CostShape {
  int nranks = 1;
  int nodes = 1;
  int ranksPerNode = 1;    ///< the largest node's rank count (uniform layouts: every node's)
  bool uniform = true;     ///< every node has ranksPerNode ranks
};

/// The multiplier of one rank's transfer time on its NIC when `k` ranks of its node (of `ranksPerNode`)
/// cross at once over `nicsPerNode` NICs: with at least one NIC per rank a rank stripes over its own
/// R/L NICs (share L/R); with fewer, the k crossing ranks spread over the R NICs (share ceil(k/R)).
double nicShare(int k, int ranksPerNode, int nicsPerNode);

/// What nicBandwidthUnderLoad found: the per-NIC figure, and the rank rate and share it came from.
struct LoadedNic {
  double bandwidth = 0;  ///< bytes per second per NIC (0: no rank crossed)
  double rankRate = 0;   ///< the deciding node's slowest crossing rank's bytes per second, latency taken out
  double share = 0;      ///< nicShare of that node's crossing ranks: bandwidth = rankRate * share
};

/// The per-NIC bandwidth from rounds run under load: `secondsPerRound[r]` is how long rank r's rounds
/// took (its best window), each moving `bytesPerRound` one way while every rank with a positive entry
/// crossed at once (0: the rank did not cross). Per node, its slowest crossing rank's round is the
/// model's step for that many crossing ranks, alpha * max(1, share) + bytes * share / bandwidth, solved
/// for the bandwidth (the transfer part kept at half the round or more, so that an alpha read high cannot
/// make it vanish); the slowest node decides, as it paces a ring between nodes.
LoadedNic nicBandwidthUnderLoad(const std::vector<double>& secondsPerRound, double bytesPerRound, double alpha,
                                const NodeLayout& layout, int nicsPerNode);

/// Predicted seconds of `a` for collective `c` moving `bytes` (the larger of the send and receive
/// buffers, as the selector sees calls). Negative when the model has no formula for the pair (the
/// algorithm is then not a candidate).
double predictSeconds(Algo a, Collective c, uint64_t bytes, const CostShape& shape, const CostParams& params);

/// One candidate of a selection, with its predicted time.
struct CostedAlgo {
  Algo algo;
  double seconds;
  uint64_t chunkBytes = 0;  ///< the chunk the model chose for it (params.chooseChunk), else 0
  int radix = 0;            ///< the radix the model chose for it (params.chooseRadix), else 0
};

/// The chunks bestChunk tries: powers of two from 64 KiB to 64 MiB.
inline constexpr uint64_t kMinChosenChunk = uint64_t{64} << 10, kMaxChosenChunk = uint64_t{64} << 20;

/// With params.chooseChunk, for the hierarchical all-reduces: the chunk (kMinChosenChunk..kMaxChosenChunk,
/// powers of two) with the least predicted time, the smaller one on a tie; 0 otherwise (params.chunkBytes
/// applies). Larger chunks mean fewer pipelined rounds, each paying a latency; smaller ones a shorter
/// fill and drain of the pipeline, where one link class idles.
uint64_t bestChunk(Algo a, Collective c, uint64_t bytes, const CostShape& shape, const CostParams& params);

/// `a` at the settings the model chooses for it: its bestChunk and, with params.chooseRadix, for rhd and
/// hier_rhd, the largest radix from 2 to params.radix whose schedule (sched::radixSchedule over the ranks,
/// or the nodes for hier_rhd) it predicts fastest; a larger radix must win by more than kTieMargin (fewer
/// messages in flight, and radix 2 needs no scratch). Negative seconds: no formula (not a candidate).
CostedAlgo bestSettings(Algo a, Collective c, uint64_t bytes, const CostShape& shape, const CostParams& params);

/// "512 KiB", "8 MiB": a chunk as describeCandidates and conflux-sim print it.
std::string chunkText(uint64_t bytes);

/// Predictions within this fraction of each other are a tie (rankAlgorithms).
inline constexpr double kTieMargin = 0.01;

/// The algorithms the model can cost for `c` on this shape (staging and peer-buffer algorithms need one
/// node and are not costed here), cheapest first, each at its bestSettings; except that
/// among the candidates within kTieMargin of the cheapest, the one registered first (algosFor order)
/// leads: the selector's choice is the front.
std::vector<CostedAlgo> rankAlgorithms(Collective c, uint64_t bytes, const CostShape& shape, const CostParams& params);

/// "hier 8.1 ms (chunk 2 MiB) < ring 12.3 ms < rhd 14.0 ms (radix 4)" (at most `limit` entries; a chunk or
/// a radix where the model chose one).
std::string describeCandidates(const std::vector<CostedAlgo>& ranked, size_t limit = 4);

/// Parses "key=value" lines (intra_alpha_us, intra_gbytes_per_s, inter_alpha_us, inter_gbytes_per_s,
/// reduce_gbytes_per_s, nics_per_node; '#' comments) into `params`. Throws Error(InvalidArgument) naming
/// the file, the line and the key on a bad line. Bandwidths are in GB/s (1e9 bytes per second).
void loadCostFile(const std::string& path, CostParams& params);

/// `params` as loadCostFile reads them back (to within a rounding): the six keys, after a '#' comment line
/// naming the source and the pipelining chunk (which the file does not set). CONFLUX_COST_SAVE writes it.
std::string formatCostText(const CostParams& params);
/// loadCostFile's parser, reading `in` (`path` names it in errors and in params.source).
void parseCostText(std::istream& in, const std::string& path, CostParams& params);

}  // namespace conflux
