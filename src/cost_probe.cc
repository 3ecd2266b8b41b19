#include "src/cost_probe.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <system_error>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "kernels/cpu/reduce.h"
#include "transport/network.h"

namespace conflux {
namespace {

using Clock = std::chrono::steady_clock;

// What rank 0 shares: its parameters as numbers (the model's inputs) and whether they are final.
struct Shared {
  double intraAlpha, intraBw, interAlpha, interBw, reduceRate, extraMessage;
  int32_t nicsPerNode;
  int32_t needProbe;  // 1: rank 0 has nothing cached; the probe pair measures now
  int32_t windowRounds;  // rank 0's CONFLUX_EXEC_WINDOW: every rank's model follows one executor setting
  char source[48];
};

Shared pack(const CostParams& p, bool needProbe) {
  Shared s{};
  s.intraAlpha = p.intra.alpha;
  s.intraBw = p.intra.bandwidth;
  s.interAlpha = p.inter.alpha;
  s.interBw = p.inter.bandwidth;
  s.reduceRate = p.reduceRate;
  s.extraMessage = p.extraMessage;
  s.nicsPerNode = p.nicsPerNode;
  s.needProbe = needProbe ? 1 : 0;
  s.windowRounds = p.windowRounds;
  std::strncpy(s.source, p.source.c_str(), sizeof s.source - 1);
  return s;
}

CostParams unpack(const Shared& s, uint64_t chunkBytes, bool chooseChunk) {
  CostParams p;
  p.intra = {s.intraAlpha, s.intraBw};
  p.inter = {s.interAlpha, s.interBw};
  p.reduceRate = s.reduceRate;
  p.extraMessage = s.extraMessage;
  p.nicsPerNode = s.nicsPerNode;
  p.chunkBytes = chunkBytes;
  p.chooseChunk = chooseChunk;
  p.windowRounds = std::max(1, int(s.windowRounds));
  p.source = std::string(s.source, strnlen(s.source, sizeof s.source));
  return p;
}

/// Rank 0's value out of an all-gather of `mine`.
template <class T>
T fromRank0(const transport::BlobAllGather& allGather, const T& mine) {
  return transport::allGatherValues(allGather, mine).front();
}

// Probe messages use call 0, which no collective uses (transport::collectiveTag): the 46 round-trip
// messages numbered from 0, the 18 stream rounds from kStreamTagBase, the fan-out's 172 from kFanTagBase
// (below the failure notice's 0x7ff); they are all consumed before the first call.
constexpr uint32_t kStreamTagBase = 64;
constexpr int kStreamWindows = 3, kStreamRounds = 6;
constexpr uint32_t kFanTagBase = 96;
constexpr int kFanWarm = 3, kFanTrips = 40;
constexpr int kMaxFanPeers = 7;  // a step of radix 8
static_assert(kStreamTagBase + kStreamWindows * kStreamRounds <= kFanTagBase, "the streams' tags run into the fan-out's");
static_assert(transport::collectiveTag(kFanTagBase + 4 * (kFanWarm + kFanTrips), 0) < transport::kFailureNoticeTag,
              "the probe's tags must stay below the failure notice's");
constexpr uint64_t probeTag(uint32_t i) { return transport::collectiveTag(i, 0); }

void check(const Status& s, const char* what) {
  if (!s) throw Error(s.code(), std::string("cost probe (") + what + "): " + s.message());
}

Status waitFor(transport::MessageTransport& t, std::span<transport::Request> reqs, int timeoutMs) {
  return transport::waitAll(t, reqs, transport::Clock::now() + std::chrono::milliseconds(timeoutMs), "cost probe");
}

/// The pair's half: 8-byte round trips. Returns the network's alpha in seconds on the measuring side
/// (rank 0), zero on the other.
double pingPong(transport::MessageTransport& t, int peer, bool measurer, int timeoutMs) {
  constexpr int kRoundTrips = 20, kWarm = 3;
  static_assert(2 * (kWarm + kRoundTrips) <= kStreamTagBase, "the round trips' tags run into the streams'");
  std::vector<uint8_t> small(8);
  uint32_t tag = 0;
  // The median round trip, not the mean: on an oversubscribed machine one trip in twenty may wait for
  // a core (milliseconds), which a mean would charge to every message of the model (a 2 x 2 job in
  // namespaces saw alpha swing from 12 to 300 us between runs with the mean).
  std::vector<double> trips;
  for (int i = 0; i < kWarm + kRoundTrips; ++i) {
    const Clock::time_point t0 = Clock::now();
    transport::Request a = measurer ? t.isend(peer, probeTag(tag), small.data(), 8) : t.irecv(peer, probeTag(tag), small.data(), 8);
    check(waitFor(t, {&a, 1}, timeoutMs), "latency");
    ++tag;
    transport::Request b = measurer ? t.irecv(peer, probeTag(tag), small.data(), 8) : t.isend(peer, probeTag(tag), small.data(), 8);
    check(waitFor(t, {&b, 1}, timeoutMs), "latency");
    ++tag;
    if (i >= kWarm) trips.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::nth_element(trips.begin(), trips.begin() + trips.size() / 2, trips.end());
  return trips[trips.size() / 2] / 2;
}

/// The ranks rank 0's fan-out reaches (extraMessageProbe): up to kMaxFanPeers on other nodes, the first
/// rank of each other node first, then their second ranks, and so on (so 2 nodes of several ranks have one
/// too, as flat rhd at a radix above 2 sends to several of the other node's ranks per step).
std::vector<int> fanPeers(const NodeLayout& layout) {
  std::vector<int> fan;
  for (size_t local = 0; fan.size() < size_t(kMaxFanPeers); ++local) {
    bool any = false;
    for (size_t k = 1; k < layout.nodes.size() && fan.size() < size_t(kMaxFanPeers); ++k) {
      if (local < layout.nodes[k].size()) {
        fan.push_back(layout.nodes[k][local]);
        any = true;
      }
    }
    if (!any) break;
  }
  return fan;
}

/// What each further message of a round adds to its latency (CostParams::extraMessage), as a step of
/// recursive halving-doubling of radix m + 1 meets it: rank 0 alternates a round trip of 8 bytes with the
/// first rank of node 1 and a fan-out round trip with the m ranks of fanPeers, whose m sends and m
/// receives are posted at once. extraMessage = (r - 1) / (m - 1), r the median over 40 pairs of trips of
/// fan-out / single, kept to 0..1 (1: the messages queue one after another; 0: their latencies overlap).
/// Returns it on rank 0, and -1 elsewhere or with fewer than 2 ranks on other nodes (nothing to measure:
/// the default stays).
double extraMessageProbe(transport::MessageTransport& t, const NodeLayout& layout, int rank, int timeoutMs) {
  const std::vector<int> fan = fanPeers(layout);
  const int m = int(fan.size());
  if (m < 2) return -1;
  const bool measurer = rank == 0;
  const bool inFan = std::find(fan.begin(), fan.end(), rank) != fan.end();
  if (!measurer && !inFan) return -1;
  std::vector<uint8_t> out(8), in(8 * size_t(m));
  std::vector<double> ratios;  // fan-out over single, trip by trip: a slow phase of the machine slows both
  for (int i = 0; i < kFanWarm + kFanTrips; ++i) {
    const uint32_t tag = kFanTagBase + 4 * uint32_t(i);  // single out, single back, fan out, fan back
    if (measurer) {
      // Both trips post the reply's receive first and wait for everything together, so that they differ
      // only in the number of peers.
      Clock::time_point t0 = Clock::now();
      transport::Request single[2] = {t.irecv(fan[0], probeTag(tag + 1), in.data(), 8),
                                      t.isend(fan[0], probeTag(tag), out.data(), 8)};
      check(waitFor(t, single, timeoutMs), "extra message");
      const double one = std::chrono::duration<double>(Clock::now() - t0).count();
      std::vector<transport::Request> reqs;
      t0 = Clock::now();
      for (size_t k = 0; k < fan.size(); ++k) reqs.push_back(t.irecv(fan[k], probeTag(tag + 3), in.data() + 8 * k, 8));
      for (size_t k = 0; k < fan.size(); ++k) reqs.push_back(t.isend(fan[k], probeTag(tag + 2), out.data(), 8));
      check(waitFor(t, reqs, timeoutMs), "extra message");
      if (i >= kFanWarm && one > 0) ratios.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / one);
    } else {
      if (rank == fan[0]) {
        transport::Request a = t.irecv(0, probeTag(tag), in.data(), 8);
        check(waitFor(t, {&a, 1}, timeoutMs), "extra message");
        transport::Request b = t.isend(0, probeTag(tag + 1), out.data(), 8);
        check(waitFor(t, {&b, 1}, timeoutMs), "extra message");
      }
      transport::Request c = t.irecv(0, probeTag(tag + 2), in.data(), 8);
      check(waitFor(t, {&c, 1}, timeoutMs), "extra message");
      transport::Request d = t.isend(0, probeTag(tag + 3), out.data(), 8);
      check(waitFor(t, {&d, 1}, timeoutMs), "extra message");
    }
  }
  if (!measurer || ratios.empty()) return -1;
  std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
  return std::clamp((ratios[ratios.size() / 2] - 1) / (m - 1), 0.0, 1.0);
}

/// Bandwidth as the collectives meet it: every rank at once runs rounds that send one `chunk` to the rank
/// of its local index on the next node and receive one from the previous node's, the lock-step pattern
/// of a ring between nodes with every local rank crossing (the inter-node phase of the hierarchical
/// all-reduces). So ranks that share a NIC, a switch or the cores that run their network stacks share
/// them here too (with a pair probed alone and the others idle, the model predicted 3 x 3 simulated
/// nodes' ranks on 2 cores up to 2.6x too fast: docs/cost-model.md). The first window of rounds only
/// lines the ranks up; each later one is timed from the end of the one before. Returns this rank's
/// seconds per round, the better of the timed windows; 0 for a rank whose local index some node lacks
/// (nodes of unequal size), which idles. The rings of different local indices are not in step: one that
/// finished early leaves the link to the others, whose last window then reads more than their share
/// (docs/cost-model.md, "The probe under load").
double streamRing(transport::MessageTransport& t, const NodeLayout& layout, int rank, size_t chunk, int timeoutMs) {
  const int nodes = int(layout.nodes.size());
  int node = 0, local = 0;
  for (int n = 0; n < nodes; ++n) {
    const auto& ranks = layout.nodes[size_t(n)];
    const auto it = std::find(ranks.begin(), ranks.end(), rank);
    if (it != ranks.end()) node = n, local = int(it - ranks.begin());
  }
  // Only local indices that every node has make complete rings; the other ranks of unequal nodes idle.
  size_t common = layout.nodes.front().size();
  for (const auto& ranks : layout.nodes) common = std::min(common, ranks.size());
  if (size_t(local) >= common) return 0;
  const auto at = [&](int n) { return layout.nodes[size_t((n + nodes) % nodes)][size_t(local)]; };
  const int next = at(node + 1), prev = at(node - 1);
  std::vector<uint8_t> out(chunk, 0x5a), in(chunk);
  double best = 0;
  Clock::time_point last = Clock::now();
  uint32_t tag = kStreamTagBase;
  for (int w = 0; w < kStreamWindows; ++w) {
    for (int r = 0; r < kStreamRounds; ++r, ++tag) {
      transport::Request reqs[2] = {t.irecv(prev, probeTag(tag), in.data(), chunk),
                                    t.isend(next, probeTag(tag), out.data(), chunk)};
      check(waitFor(t, reqs, timeoutMs), "bandwidth");
    }
    const Clock::time_point now = Clock::now();
    const double secs = std::chrono::duration<double>(now - last).count() / kStreamRounds;
    if (w > 0 && secs > 0) best = best == 0 ? secs : std::min(best, secs);
    last = now;
  }
  return best;
}

/// Rank 0's local numbers: copy bandwidth (two copies per shared-memory transfer) and reduction rate.
void measureLocal(CostParams& p) {
  constexpr size_t kBytes = size_t(4) << 20;
  std::vector<float> a(kBytes / 4, 1.0f), b(kBytes / 4, 2.0f), c(kBytes / 4);
  double copyBest = 0, reduceBest = 0;
  const cpu::ReduceFn sum = cpu::reduceFunction(DataType::Float32, RedOp::Sum);
  for (int i = 0; i < 3; ++i) {
    auto t0 = Clock::now();
    cpu::copy(c.data(), a.data(), kBytes);
    const double copySecs = std::chrono::duration<double>(Clock::now() - t0).count();
    const void* srcs[2] = {a.data(), b.data()};
    t0 = Clock::now();
    sum(c.data(), srcs, 2, a.size());
    const double reduceSecs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (copySecs > 0) copyBest = std::max(copyBest, kBytes / copySecs);
    if (reduceSecs > 0) reduceBest = std::max(reduceBest, kBytes / reduceSecs);
  }
  if (copyBest > 0) p.intra.bandwidth = copyBest / 2;
  if (reduceBest > 0) p.reduceRate = reduceBest;
}

/// CONFLUX_COST_SAVE: rank 0 writes the parameters in CONFLUX_COST_FILE's format, to a temporary file
/// renamed into place, so that a job reading the path never sees half a file (rank 0 of every
/// communicator across nodes writes it). A file that cannot be written is a warning: the communicator
/// works without it.
void saveCostParams(const CostParams& p) {
  const std::string path = config::getString(config::Var::COST_SAVE);
  if (path.empty()) return;
  const std::string text = formatCostText(p);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int err = 0;
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    err = errno;
  } else {
    if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) err = errno != 0 ? errno : EIO;
    if (std::fclose(f) != 0 && err == 0) err = errno;
    if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
    if (err != 0) std::remove(tmp.c_str());
  }
  if (err != 0) {
    CFX_WARN(kTuning, "CONFLUX_COST_SAVE: cannot write '%s': %s", path.c_str(),
             std::system_category().message(err).c_str());
  }
}

std::mutex gCacheMutex;
std::map<std::string, CostParams> gCache;  // probed parameters by job, rank 0's endpoints and node sizes

}  // namespace

CostParams calibrateCostModel(int rank, const NodeLayout& layout, transport::Network& net, uint64_t chunkBytes,
                              bool chooseChunk, int windowRounds, int timeoutMs, const transport::BlobAllGather& allGather) {
  const std::string endpointKey = net.endpointKey();
  // NICs per node: distinct endpoint identities among a node's ranks.
  struct Key {
    char text[128];
  } mine{};
  std::strncpy(mine.text, endpointKey.c_str(), sizeof mine.text - 1);
  const std::vector<Key> keys = transport::allGatherValues(allGather, mine);
  int nics = 1;
  for (const auto& node : layout.nodes) {
    std::set<std::string> distinct;
    for (int r : node) distinct.insert(std::string(keys[size_t(r)].text));
    nics = std::max(nics, int(distinct.size()));
  }

  CostParams params;
  params.chunkBytes = chunkBytes;
  params.nicsPerNode = nics;
  const std::string file = config::getString(config::Var::COST_FILE);
  const bool probe = config::getBool(config::Var::COST_PROBE) && layout.nodes.size() > 1;
  const int peer = layout.nodes.size() > 1 ? layout.nodes[1].front() : -1;
  // The bandwidth depends on how many ranks of each node cross at once, so the node sizes are in the key:
  // a split child with one rank per node measures its own.
  std::string cacheKey = config::getString(config::Var::JOB_ID) + "|" + std::to_string(nics) + "|" + endpointKey + "|";
  for (const auto& node : layout.nodes) cacheKey += std::to_string(node.size()) + ",";
  bool needProbe = false;
  if (rank == 0) {
    if (!file.empty()) {
      loadCostFile(file, params);  // errors name the file and the line
      if (params.nicsPerNode <= 0) params.nicsPerNode = nics;
    } else if (probe) {
      std::lock_guard<std::mutex> lock(gCacheMutex);
      auto it = gCache.find(cacheKey);
      if (it != gCache.end()) params = it->second;
      else needProbe = true;
    }
  }
  params.windowRounds = windowRounds;
  Shared first = fromRank0(allGather, pack(params, needProbe));
  if (!first.needProbe) {
    const CostParams shared = unpack(first, chunkBytes, chooseChunk);
    if (rank == 0) saveCostParams(shared);
    return shared;
  }

  if (rank == 0 || rank == peer) {
    const double alpha = pingPong(net, rank == 0 ? peer : 0, rank == 0, timeoutMs);
    if (rank == 0) {
      params.inter.alpha = alpha;
      measureLocal(params);
    }
  }
  const double extra = extraMessageProbe(net, layout, rank, timeoutMs);
  if (extra >= 0) params.extraMessage = extra;
  // Every rank streams at once, starting together: the round trips above measured a quiet network.
  transport::allGatherValues(allGather, int32_t{0});
  // The default chunk, whatever this communicator's: later communicators of the same shape reuse the numbers.
  const size_t chunk = kPipelineChunkBytes;
  const double perRound = streamRing(net, layout, rank, chunk, timeoutMs);
  const std::vector<double> perRoundOf = transport::allGatherValues(allGather, perRound);
  if (rank == 0) {
    const LoadedNic loaded = nicBandwidthUnderLoad(perRoundOf, double(chunk), params.inter.alpha, layout, nics);
    if (loaded.bandwidth > 0) params.inter.bandwidth = loaded.bandwidth;
    params.source = "probe";
    std::lock_guard<std::mutex> lock(gCacheMutex);
    gCache[cacheKey] = params;
    char extraText[96];
    if (extra >= 0) {
      std::snprintf(extraText, sizeof extraText, "%.2f alpha (a fan-out to %d ranks on other nodes)", extra,
                    int(fanPeers(layout).size()));
    } else {
      std::snprintf(extraText, sizeof extraText, "%.2f alpha (not measured: fewer than 2 ranks on other nodes)",
                    params.extraMessage);
    }
    CFX_INFO(kTuning, "cost model probe: network alpha %.1f us, %.4f GB/s per NIC (%d per node) with every rank "
             "crossing at once (slowest rank %.4f GB/s x share %.2f); each further message of a round %s; "
             "copy %.2f GB/s, reduce %.2f GB/s",
             params.inter.alpha * 1e6, params.inter.bandwidth / 1e9, nics, loaded.rankRate / 1e9, loaded.share,
             extraText, params.intra.bandwidth / 1e9, params.reduceRate / 1e9);
  }
  params.windowRounds = windowRounds;
  const CostParams shared = unpack(fromRank0(allGather, pack(params, false)), chunkBytes, chooseChunk);
  if (rank == 0) saveCostParams(shared);
  return shared;
}

}  // namespace conflux
