// Every algorithm, for every collective it supports, must pass the simulator across rank counts,
// roots, counts (0, 1, 7, n-1, n+1, 1023 and counts split into several chunks), element sizes,
// in-place and out-of-place layouts, reduction ops and chunk / staging sizes.
//
// Small communicators (1..12 ranks) get the full cross product; 13..64 ranks a deterministic sample
// that still covers every count; a few large communicators (100..512) the cheap cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/simulator.h"

namespace conflux {
namespace {

struct Combo {
  Algo algo;
  Collective coll;
};

std::vector<Combo> allCombos() {
  std::vector<Combo> out;
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    for (Algo a : algosFor(coll)) out.push_back({a, coll});
  }
  return out;
}

void PrintTo(const Combo& c, std::ostream* os) { *os << algoName(c.algo) << " " << collectiveName(c.coll); }

bool rooted(Collective c) { return c == Collective::Reduce || c == Collective::Broadcast; }
bool perBlockStaging(Collective c) { return c == Collective::ReduceScatter || c == Collective::AllToAll; }

/// One dimension choice of a configuration.
struct Knobs {
  uint64_t count;
  uint32_t elt;
  bool inPlace;
  int root;
  bool smallChunks;  // small chunkBytes / stagingBytes, forcing several chunks
  RedOp op;
};

SimConfig makeConfig(const Combo& cb, int n, const Knobs& k, uint64_t seed) {
  SimConfig cfg;
  PlanParams& p = cfg.params;
  p.coll = cb.coll;
  p.nranks = n;
  p.count = k.count;
  p.eltSize = k.elt;
  p.root = k.root;
  const uint64_t unit = (perBlockStaging(cb.coll) ? n : 1) * uint64_t{k.elt};
  const uint64_t whole = std::max(bufferSizes(p).send, bufferSizes(p).recv);
  if (k.smallChunks) {
    // A few elements per chunk: several pipelined chunks, several staging chunks (both halves).
    p.chunkBytes = 5 * uint64_t{k.elt} + (k.count % 3);
    p.stagingBytes = 2 * unit * (1 + k.count % 4);
  } else {
    p.chunkBytes = 1u << 20;
    p.stagingBytes = std::max<uint64_t>(2 * whole, 2 * unit);
  }
  cfg.op = k.op;
  cfg.inPlace = k.inPlace;
  cfg.calls = n <= 12 ? 2 + static_cast<int>(seed % 2) : 2;
  cfg.seed = seed;
  return cfg;
}

std::vector<uint64_t> countsFor(int n) {
  std::vector<uint64_t> c = {0, 1, 7, static_cast<uint64_t>(n - 1), static_cast<uint64_t>(n + 1), 1023};
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  return c;
}

std::vector<int> rootsFor(const Combo& cb, int n) {
  if (!rooted(cb.coll)) return {0};
  std::vector<int> r = {0, n - 1, n / 2};
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

constexpr RedOp kOps[] = {RedOp::Avg,       RedOp::Sum, RedOp::PreMulSum, RedOp::Max,  RedOp::Avg, RedOp::Min,
                          RedOp::PreMulSum, RedOp::Prod, RedOp::Bxor,      RedOp::Band, RedOp::Bor};
constexpr size_t kNumOps = std::size(kOps);

/// Runs one configuration; records a failure message (at most a few per test).
class Runner {
 public:
  explicit Runner(Combo cb) : cb_(cb) {}
  void run(int n, Knobs k) {
    // Plans over peers' buffers read inputs the executor cannot scale: PreMulSum never runs them.
    if (k.op == RedOp::PreMulSum && algoUsesPeerBuffers(cb_.algo)) k.op = RedOp::Sum;
    const SimConfig cfg = makeConfig(cb_, n, k, ++runs_ * 7919 + static_cast<uint64_t>(n));
    const SimResult r = simulate(cfg, cb_.algo);
    if (!r.ok && ++failures_ <= 5) ADD_FAILURE() << algoName(cb_.algo) << ": " << r.error;
  }
  ~Runner() {
    if (failures_ > 5) ADD_FAILURE() << failures_ << " failing configurations in total";
  }
  int runs() const { return static_cast<int>(runs_); }
  bool inPlaceAllowed() const { return cb_.coll != Collective::AllToAll; }

 private:
  Combo cb_;
  uint64_t runs_ = 0;
  int failures_ = 0;
};

std::string comboName(const testing::TestParamInfo<Combo>& info) {
  return std::string(algoName(info.param.algo)) + "_" + std::string(collectiveName(info.param.coll));
}

class AlgoSim : public testing::TestWithParam<Combo> {};

// Full cross product for small communicators.
TEST_P(AlgoSim, SmallRanksAllConfigs) {
  Runner run(GetParam());
  for (int n = 1; n <= 12; ++n) {
    int i = 0;
    for (uint64_t count : countsFor(n)) {
      for (uint32_t elt : {1u, 2u, 4u, 8u}) {
        for (bool inPlace : {false, true}) {
          if (inPlace && !run.inPlaceAllowed()) continue;
          for (int root : rootsFor(GetParam(), n)) {
            for (bool small : {false, true}) {
              run.run(n, {count, elt, inPlace, root, small, kOps[i++ % kNumOps]});
            }
          }
        }
      }
    }
  }
  RecordProperty("configs", run.runs());
}

bool vectorCollective(Collective c) {
  return c == Collective::AllReduce || c == Collective::Reduce || c == Collective::Broadcast;
}

// Sampled: every n in 13..64 with counts 0, 1, 7, n-1, n+1 and every root, the other knobs rotating;
// count 1023 (and split into several chunks) for a few n (fewer where the data grows with n * count).
TEST_P(AlgoSim, MediumRanksSampled) {
  Runner run(GetParam());
  const Collective coll = GetParam().coll;
  int i = 0;
  for (int n = 13; n <= 64; ++n) {
    std::vector<uint64_t> counts = {0, 1, 7, static_cast<uint64_t>(n - 1), static_cast<uint64_t>(n + 1)};
    const bool big = vectorCollective(coll) ? (n % 16 == 0 || n == 31 || n == 33 || n == 63) : (n == 16 || n == 33);
    if (big) counts.push_back(1023);
    for (uint64_t count : counts) {
      for (int root : rootsFor(GetParam(), n)) {
        const uint32_t elt = 1u << (i % 4);
        const bool inPlace = run.inPlaceAllowed() && (i / 4) % 2 == 1;
        run.run(n, {count, elt, inPlace, root, count == 1023 ? (n % 2 == 1) : (i / 2) % 2 == 0, kOps[i % kNumOps]});
        ++i;
      }
    }
  }
  RecordProperty("configs", run.runs());
}

// Large communicators, small counts (ring and pairwise take n^2 rounds, the staging algorithms read
// n^2 pieces).
TEST_P(AlgoSim, LargeRanks) {
  Runner run(GetParam());
  const Collective coll = GetParam().coll;
  int i = 0;
  for (int n : {100, 128, 256, 512}) {
    std::vector<uint64_t> counts = {7};
    if (n < 512) counts = {0, 1, 7};
    if (n <= 256 && vectorCollective(coll)) counts.push_back(static_cast<uint64_t>(n + 1));
    for (uint64_t count : counts) {
      const int root = rooted(coll) ? (i % 3 == 0 ? 0 : (i % 3 == 1 ? n - 1 : n / 2)) : 0;
      const bool inPlace = run.inPlaceAllowed() && i % 2 == 1;
      run.run(n, {count, 1u << (i % 4), inPlace, root, i % 3 == 2, kOps[i % kNumOps]});
      ++i;
    }
  }
  RecordProperty("configs", run.runs());
}

INSTANTIATE_TEST_SUITE_P(Sweep, AlgoSim, testing::ValuesIn(allCombos()), comboName);

}  // namespace
}  // namespace conflux
