// Every collective x datatype x op, in and out of place, on 1..8 real processes, against the reference.
#include <gtest/gtest.h>

#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "tests/multiproc/collective_cases.h"
#include "tests/multiproc/harness.h"

using namespace conflux::testing;

namespace {

class Collectives : public ::testing::TestWithParam<int> {};

// The acceptance sweep: counts 0, 1, 7, 1023 and 1M+3 for every collective, datatype and op.
TEST_P(Collectives, EveryTypeOpAndLayout) {
  const int n = GetParam();
  Sweep sweep = fullSweep({0, 1, 7, 1023, (1u << 20) + 3});
  auto out = runRanks(n, [&](int r, int nr, const cfxUniqueId& id) { return sweepOnNewComm(r, nr, id, sweep); });
  EXPECT_TRUE(allSucceeded(out));
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Range(1, 9),
                         [](const auto& p) { return std::to_string(p.param) + "ranks"; });

// Counts on both sides of the eager limit (CONFLUX_EAGER_BYTES=auto: 65536 bytes per rank on 3 ranks,
// 32768 on 5; per type, and all n blocks of float32s for reduce-scatter and all-to-all), alternating
// eager calls and plans so slot reuse is exercised too.
class EagerBoundary : public ::testing::TestWithParam<int> {};

TEST_P(EagerBoundary, MatchesReference) {
  const int n = GetParam();
  const uint64_t limit = n <= 4 ? 65536 : 32768;  // docs/environment.md, CONFLUX_EAGER_BYTES
  std::vector<uint64_t> counts;
  for (uint64_t elt : {1, 2, 4, 8}) {
    for (uint64_t c : {limit / elt - 1, limit / elt, limit / elt + 1}) counts.push_back(c);
  }
  const uint64_t blocks = limit / (4 * static_cast<uint64_t>(n));  // float32 blocks of n that fit
  counts.push_back(blocks);
  counts.push_back(blocks + 1);
  Sweep sweep = fullSweep(counts);
  sweep.types = {cfxInt8, cfxFloat16, cfxFloat32, cfxFloat64};
  auto out = runRanks(n, [&](int r, int nr, const cfxUniqueId& id) { return sweepOnNewComm(r, nr, id, sweep); });
  EXPECT_TRUE(allSucceeded(out));
}

INSTANTIATE_TEST_SUITE_P(Ranks, EagerBoundary, ::testing::Values(3, 5),
                         [](const auto& p) { return std::to_string(p.param) + "ranks"; });

// Buffers from cfxMemAlloc on every rank: the direct algorithms (no staging) for every collective, type
// and op; and on even ranks only, where every rank must agree to stage instead.
struct MemoryCase {
  Sweep::Memory memory;
  int nranks;
};

void PrintTo(const MemoryCase& c, std::ostream* os) {
  *os << (c.memory == Sweep::Memory::Shared ? "shared" : "mixed") << " on " << c.nranks << " ranks";
}

class LibraryMemory : public ::testing::TestWithParam<MemoryCase> {};

TEST_P(LibraryMemory, MatchesReference) {
  const MemoryCase c = GetParam();
  Sweep sweep = fullSweep({0, 1, 7, 1023, 65539, (1u << 18) + 5});
  sweep.memory = c.memory;
  if (c.memory != Sweep::Memory::Shared) sweep.types = {cfxInt8, cfxBfloat16, cfxFloat32, cfxFloat64};
  RunOptions opts;
  opts.env = {{"CONFLUX_DEBUG", "WARN"}};
  auto out = runRanks(c.nranks, [&](int r, int nr, const cfxUniqueId& id) { return sweepOnNewComm(r, nr, id, sweep); }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

INSTANTIATE_TEST_SUITE_P(
    Memory, LibraryMemory,
    ::testing::Values(MemoryCase{Sweep::Memory::Shared, 2}, MemoryCase{Sweep::Memory::Shared, 3},
                      MemoryCase{Sweep::Memory::Shared, 5}, MemoryCase{Sweep::Memory::SharedOnEvenRanks, 3}),
    [](const auto& p) {
      return std::string(p.param.memory == Sweep::Memory::Shared ? "Shared" : "Mixed") + "_" +
             std::to_string(p.param.nranks) + "ranks";
    });

// Every algorithm forced through CONFLUX_ALGO (it falls back, with a log line, where it does not apply),
// on rank counts that are and are not powers of two.
struct AlgoCase {
  const char* algo;
  int nranks;
};

void PrintTo(const AlgoCase& c, std::ostream* os) { *os << c.algo << " on " << c.nranks << " ranks"; }

class ForcedAlgorithm : public ::testing::TestWithParam<AlgoCase> {};

TEST_P(ForcedAlgorithm, MatchesReference) {
  const AlgoCase c = GetParam();
  Sweep sweep = fullSweep({0, 1, 7, 1023, 65539});
  sweep.types = {cfxInt8, cfxBfloat16, cfxFloat32, cfxFloat64, cfxUint64};
  RunOptions opts;
  opts.env = {{"CONFLUX_ALGO", c.algo}, {"CONFLUX_SHM_STAGING_BYTES", "65536"}};
  auto out = runRanks(c.nranks, [&](int r, int nr, const cfxUniqueId& id) { return sweepOnNewComm(r, nr, id, sweep); },
                      opts);
  EXPECT_TRUE(allSucceeded(out));
}

INSTANTIATE_TEST_SUITE_P(
    Algos, ForcedAlgorithm,
    ::testing::Values(AlgoCase{"ring", 3}, AlgoCase{"ring", 4}, AlgoCase{"rhd", 3}, AlgoCase{"rhd", 6},
                      AlgoCase{"tree", 5}, AlgoCase{"dbtree", 4}, AlgoCase{"dbtree", 7}, AlgoCase{"oneshot", 3},
                      AlgoCase{"twoshot", 5}, AlgoCase{"pairwise", 4}, AlgoCase{"direct", 3}, AlgoCase{"eager", 3},
                      AlgoCase{"eager", 4}),
    [](const auto& p) { return std::string(p.param.algo) + "_" + std::to_string(p.param.nranks) + "ranks"; });

// CONFLUX_SHM_STREAM_STAGING=1: copies into staging with non-temporal stores (their fence before the
// barrier is what makes them visible to the peer). The plans that stage: one-shot and two-shot, chosen by
// the selector on 2 and 4 ranks and forced on 3 and 5.
class StreamedStaging : public ::testing::TestWithParam<AlgoCase> {};

TEST_P(StreamedStaging, MatchesReference) {
  const AlgoCase c = GetParam();
  Sweep sweep = fullSweep({0, 1, 7, 1023, 65539, 300007});
  sweep.types = {cfxInt8, cfxFloat16, cfxFloat32, cfxFloat64};
  RunOptions opts;
  opts.env = {{"CONFLUX_ALGO", c.algo}, {"CONFLUX_SHM_STREAM_STAGING", "1"}, {"CONFLUX_SHM_STAGING_BYTES", "65536"}};
  auto out = runRanks(c.nranks, [&](int r, int nr, const cfxUniqueId& id) { return sweepOnNewComm(r, nr, id, sweep); },
                      opts);
  EXPECT_TRUE(allSucceeded(out));
}

INSTANTIATE_TEST_SUITE_P(Algos, StreamedStaging,
                         ::testing::Values(AlgoCase{"", 2}, AlgoCase{"", 4}, AlgoCase{"oneshot", 3},
                                           AlgoCase{"twoshot", 5}),
                         [](const auto& p) {
                           return std::string(*p.param.algo ? p.param.algo : "selector") + "_" +
                                  std::to_string(p.param.nranks) + "ranks";
                         });

// Simulated nodes on loopback (no namespaces, no root): rank r is on node nodeOf[r], and ranks of
// different nodes talk through the network transport CONFLUX_NET names: libfabric's tcp provider (ofi,
// where built) or plain TCP sockets (tcp). Every collective, datatype and op with the selector's choices,
// and with the hierarchical plans forced (all-reduce, all-gather, reduce-scatter and broadcast; uneven
// 2+1 falls back to the ring); recursive halving-doubling of a larger radix (CONFLUX_RHD_RADIX) flat on 5
// nodes (one folds) and between 3 nodes in hier_rhd.
struct NodesCase {
  std::vector<int> nodeOf;
  const char* algo;
  const char* net = "auto";
  const char* radix = "2";
};

void PrintTo(const NodesCase& c, std::ostream* os) {
  *os << c.nodeOf.size() << " ranks, algo " << c.algo << ", net " << c.net;
}

class NodesOnLoopback : public ::testing::TestWithParam<NodesCase> {};

TEST_P(NodesOnLoopback, MatchesReference) {
  const NodesCase c = GetParam();
  Sweep sweep = fullSweep({0, 1, 1023, 300007});
  sweep.types = {cfxInt8, cfxFloat16, cfxFloat32, cfxFloat64};
  RunOptions opts;
  opts.env = {{"CONFLUX_ALGO", c.algo}, {"CONFLUX_NET", c.net}, {"CONFLUX_RHD_RADIX", c.radix}};
  auto out = runRanks(static_cast<int>(c.nodeOf.size()), [&](int r, int nr, const cfxUniqueId& id) {
    simulateNode(c.nodeOf[r]);
    return sweepOnNewComm(r, nr, id, sweep);
  }, opts);
  EXPECT_TRUE(allSucceeded(out));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, NodesOnLoopback,
    ::testing::Values(NodesCase{{0, 0, 1, 1}, ""}, NodesCase{{0, 0, 1, 1}, "hier"}, NodesCase{{0, 1, 0, 1, 0, 1}, "hier"},
                      NodesCase{{0, 1, 0}, ""}, NodesCase{{0, 0, 1}, "hier"},
                      // The same sweep over the tcp transport.
                      NodesCase{{0, 0, 1, 1}, "", "tcp"}, NodesCase{{0, 1, 0, 1, 0, 1}, "hier", "tcp"},
                      NodesCase{{0, 1, 0}, "", "tcp"}, NodesCase{{0, 0, 1}, "hier", "tcp"},
                      NodesCase{{0, 1, 2, 3, 4}, "rhd", "auto", "4"}, NodesCase{{0, 1, 2, 0, 1, 2}, "hier_rhd", "auto", "3"}),
    [](const auto& p) {
      std::string name;
      for (int node : p.param.nodeOf) name += std::to_string(node);
      const std::string algo = *p.param.algo ? p.param.algo : "auto";
      const std::string radix = std::string(p.param.radix) == "2" ? "" : "_radix" + std::string(p.param.radix);
      return "nodes" + name + "_" + algo + radix + (std::string(p.param.net) == "tcp" ? "_tcp" : "");
    });

}  // namespace
