// The tuner's files: CONFLUX_TUNER_CONFIG rules (good lines applied ahead of the model, bad lines
// warned about through NCCL's logger, naming the line, and ignored) and CONFLUX_COST_FILE (the model's
// parameters; a bad file is a warning and the defaults). Each test runs in its own process (ctest), and
// sets the variables before init.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "algorithms/cost_model.h"
#include "tests/plugin/tuner_api.h"

namespace conflux::plugintest {
namespace {

/// A temporary file holding `text`, removed with the object.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    path_ = ::testing::TempDir() + "conflux-tuner-XXXXXX";
    const int fd = ::mkstemp(path_.data());
    EXPECT_GE(fd, 0);
    if (fd >= 0) ::close(fd);
    std::ofstream(path_) << text;
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Sets an environment variable for the scope.
struct ScopedEnv {
  const char* name;
  ScopedEnv(const char* n, const std::string& value) : name(n) { ::setenv(n, value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(name); }
};

const char* kRules =
    "# Conflux tuner rules\n"
    "allreduce 0 64K ring simple 4   # line 2\n"
    "allgather 1K 1M pat ll          # line 3: PAT is unavailable in these tables\n"
    "AllReduce 1M 1G tree LL128      # line 4\n"
    "bogus 0 1 tree ll\n"               // 5: unknown collective
    "allreduce 10 5 tree ll\n"          // 6: min above max
    "allreduce 0 1K warp ll\n"          // 7: unknown algorithm
    "allreduce 0 1K tree fast\n"        // 8: unknown protocol
    "allreduce 0 1K tree ll 0\n"        // 9: bad channel count
    "allreduce 0\n"                     // 10: too few fields
    "\n"
    "any 0 1G ring ll                # line 12: everything else up to 1 GiB\n"
    "reduce 1x 2 ring ll\n";            // 13: bad minBytes

class TunerFiles : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override {
    api_ = std::make_unique<TunerApi>(std::get<0>(GetParam()), std::get<1>(GetParam()));
    ASSERT_TRUE(api_->ok());
    capturedLogs().clear();
  }
  /// Calls getCollInfo on a fresh NCCL table; returns it, with the channel count in `nChannels`.
  NcclTable call(void* ctx, int coll, size_t bytes, int& nChannels) {
    NcclTable t(coll, bytes);
    nChannels = 17;
    EXPECT_EQ(api_->getCollInfo(ctx, coll, bytes, t.data(), 7, 3, &nChannels), abi::kSuccess);
    return t;
  }
  std::unique_ptr<TunerApi> api_;
};

/// The entries of `t` that are 0.0, as "algo/proto" strings.
std::string lowered(const NcclTable& t) {
  std::string s;
  for (int a = 0; a < abi::kNumAlgorithms; ++a) {
    for (int p = 0; p < abi::kNumProtocols; ++p) {
      if (t.cost[a][p] != 0.0f) continue;
      if (!s.empty()) s += ',';
      s += std::to_string(a);
      s += '/';
      s += std::to_string(p);
    }
  }
  return s;
}

TEST_P(TunerFiles, RulesAppliedBadLinesWarned) {
  TempFile file(kRules);
  ScopedEnv env("CONFLUX_TUNER_CONFIG", file.path());
  void* ctx = nullptr;
  ASSERT_EQ(api_->init(16, 2, &ctx), abi::kSuccess);

  // Exactly the seven bad lines, each named by file and line.
  const auto warned = warnings();
  ASSERT_EQ(warned.size(), 7u);
  const int badLines[] = {5, 6, 7, 8, 9, 10, 13};
  for (size_t i = 0; i < warned.size(); ++i) {
    EXPECT_NE(warned[i].find(file.path() + ":" + std::to_string(badLines[i]) + ":"), std::string::npos) << warned[i];
    EXPECT_NE(warned[i].find("ignored"), std::string::npos) << warned[i];
  }
  EXPECT_NE(warned[0].find("bogus"), std::string::npos);
  EXPECT_NE(warned[2].find("warp"), std::string::npos);

  int ch = 0;
  // Line 2: all-reduce up to 64 KiB on RING/SIMPLE with 4 channels (the model alone would pick TREE).
  EXPECT_EQ(lowered(call(ctx, abi::kCollAllReduce, 4096, ch)), "1/2");
  EXPECT_EQ(ch, 4);
  EXPECT_EQ(lowered(call(ctx, abi::kCollAllReduce, 65536, ch)), "1/2");  // max bytes inclusive
  // Line 4: TREE/LL128 from 1 MiB to 1 GiB; no channel count, so nChannels stays.
  EXPECT_EQ(lowered(call(ctx, abi::kCollAllReduce, 4 << 20, ch)), "0/1");
  EXPECT_EQ(ch, 17);
  // Line 3 matches all-gather but PAT is unavailable: passed over for line 12's RING/LL.
  EXPECT_EQ(lowered(call(ctx, abi::kCollAllGather, 4096, ch)), "1/0");
  EXPECT_EQ(lowered(call(ctx, abi::kCollBroadcast, 8, ch)), "1/0");
  EXPECT_EQ(ch, 17);
  // 100 KiB all-reduce: between lines 2 and 4, so line 12 (any) applies.
  EXPECT_EQ(lowered(call(ctx, abi::kCollAllReduce, 100 << 10, ch)), "1/0");
  // Above every rule's range: the model decides (RING/SIMPLE for 2 GiB on 16/2 with default parameters).
  EXPECT_EQ(lowered(call(ctx, abi::kCollAllReduce, size_t{2} << 30, ch)), "1/2");
  EXPECT_EQ(ch, 17);

  // Each applied rule is logged once at INFO, naming its line.
  int ruleLogs = 0;
  for (const LogLine& l : capturedLogs()) ruleLogs += l.level == abi::kLogInfo && l.text.find("by rule at line") != std::string::npos;
  EXPECT_EQ(ruleLogs, 5);  // line 2, line 4, and line 12 for all-gather, broadcast and all-reduce
  EXPECT_EQ(api_->finalize(ctx), abi::kSuccess);
}

TEST_P(TunerFiles, UnreadableRulesFileIsOneWarning) {
  ScopedEnv env("CONFLUX_TUNER_CONFIG", "/nonexistent/conflux-tuner-rules");
  void* ctx = nullptr;
  ASSERT_EQ(api_->init(8, 1, &ctx), abi::kSuccess);
  ASSERT_EQ(warnings().size(), 1u);
  EXPECT_NE(warnings()[0].find("cannot read"), std::string::npos);
  int ch = 0;
  EXPECT_EQ(lowered(call(ctx, abi::kCollAllReduce, 8, ch)), "0/0");  // the model: TREE/LL
  EXPECT_EQ(api_->finalize(ctx), abi::kSuccess);
}

/// Whether the model puts the tree family ahead of the ring family for an all-reduce of `bytes` on 16/2.
bool treeFamilyWins(size_t bytes, const CostParams& params) {
  CostShape shape;
  shape.nranks = 16;
  shape.nodes = 2;
  shape.ranksPerNode = 8;
  auto best = [&](std::initializer_list<Algo> family) {
    double b = -1;
    for (Algo a : family) {
      const double s = predictSeconds(a, Collective::AllReduce, bytes, shape, params);
      if (s >= 0 && (b < 0 || s < b)) b = s;
    }
    return b;
  };
  return best({Algo::BinomialTree, Algo::DoubleBinaryTree, Algo::HierarchicalDbtree}) <
         best({Algo::Ring, Algo::Hierarchical});
}

TEST_P(TunerFiles, CostFileDrivesTheModel) {
  // A network slow to start but fast once going: the families trade places at other sizes than by default.
  TempFile costs("inter_alpha_us=5000\ninter_gbytes_per_s=100\n");
  ScopedEnv env("CONFLUX_COST_FILE", costs.path());
  CostParams params;
  loadCostFile(costs.path(), params);
  void* ctx = nullptr;
  ASSERT_EQ(api_->init(16, 2, &ctx), abi::kSuccess);
  EXPECT_TRUE(warnings().empty());
  int differs = 0;
  for (size_t bytes = 8; bytes <= (size_t{1} << 30); bytes *= 4) {
    int ch = 0;
    const NcclTable t = call(ctx, abi::kCollAllReduce, bytes, ch);
    const bool tree = treeFamilyWins(bytes, params);
    const int row = tree ? abi::kAlgoTree : abi::kAlgoRing;
    EXPECT_TRUE(t.cost[row][0] == 0.0f || t.cost[row][1] == 0.0f || t.cost[row][2] == 0.0f) << bytes;
    differs += tree != treeFamilyWins(bytes, CostParams{});
  }
  // Where the defaults would choose differently, the file's parameters must be the ones the plugin used.
  EXPECT_GT(differs, 0) << "the cost file should change at least one decision";
  EXPECT_EQ(api_->finalize(ctx), abi::kSuccess);
}

TEST_P(TunerFiles, BadCostFileWarnsAndUsesDefaults) {
  TempFile costs("inter_alpha_us=fast\n");
  ScopedEnv env("CONFLUX_COST_FILE", costs.path());
  void* ctx = nullptr;
  ASSERT_EQ(api_->init(16, 2, &ctx), abi::kSuccess);
  ASSERT_EQ(warnings().size(), 1u);
  EXPECT_NE(warnings()[0].find(costs.path() + ":1"), std::string::npos) << warnings()[0];
  int ch = 0;
  EXPECT_EQ(lowered(call(ctx, abi::kCollAllReduce, 8, ch)), "0/0");
  EXPECT_EQ(api_->finalize(ctx), abi::kSuccess);
}

INSTANTIATE_TEST_SUITE_P(Libraries, TunerFiles, ::testing::ValuesIn(tunerApis()), tunerApiName);

}  // namespace
}  // namespace conflux::plugintest
