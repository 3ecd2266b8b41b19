// The flight recorder (src/flight_recorder.h) in one process: the ring keeps the last calls, a reader
// never sees a torn entry while the call thread writes, the dump is valid JSON of schema v1 written
// atomically, and conflux-trace's analysis (tools/trace/trace_analysis.h) reads such dumps, made here
// by one recorder per simulated rank, to the right conclusions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/ticks.h"
#include "src/flight_recorder.h"
#include "tools/trace/trace_analysis.h"

using namespace conflux;

namespace {

TraceIdentity rankIdentity(int rank, int nranks, const std::string& comm = "c0ffee") {
  TraceIdentity id;
  id.commId = comm;
  id.name = "test";
  id.rank = rank;
  id.nranks = nranks;
  id.host = "h" + std::to_string(rank);
  return id;
}

// One all-reduce of `count` floats, completed or left as `ok` says.
void call(FlightRecorder& r, uint64_t count, bool complete = true, bool ok = true) {
  const uint64_t t = ticksNow();
  TraceCursor c = r.begin(Collective::AllReduce, DataType::Float32, RedOp::Sum, 0, count, t, t);
  r.setAlgorithm(c, r.internAlgorithm("ring"));
  if (complete) FlightRecorder::end(c, ok, ticksNow());
}

trace::RankDump reparse(const FlightRecorder& r, const std::string& reason = "error") {
  return trace::parseDump(nlohmann::json::parse(r.toJson(reason)), "rank" + std::to_string(r.identity().rank));
}

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() / ("cfx-trace-" + std::to_string(getpid()) + "-" +
                                                      std::to_string(counter_++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

}  // namespace

TEST(FlightRecorder, KeepsTheLastEntriesInOrder) {
  FlightRecorder r(rankIdentity(0, 1), 4, "");
  for (uint64_t i = 1; i <= 10; ++i) call(r, i);
  auto recs = r.snapshot();
  ASSERT_EQ(recs.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(recs[i].seq, 7 + i);
    EXPECT_EQ(recs[i].count, 7 + i);
    EXPECT_EQ(recs[i].state, TraceState::Completed);
    EXPECT_GE(recs[i].endTicks, recs[i].startTicks);
  }
  EXPECT_EQ(r.snapshot(2).front().seq, 9u);
}

TEST(FlightRecorder, RecordsStateAlgorithmAndWaits) {
  FlightRecorder r(rankIdentity(1, 3), 8, "");
  call(r, 16);
  const uint64_t t = ticksNow();
  TraceCursor c = r.begin(Collective::Broadcast, DataType::Int64, RedOp::Sum, 2, 5, t, t);
  c.noteWait(1, 2);
  TraceCursor p = r.beginP2p(3, 100, t, t);
  FlightRecorder::end(p, false, ticksNow());
  auto recs = r.snapshot();
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[1].coll, Collective::Broadcast);
  EXPECT_EQ(recs[1].dtype, DataType::Int64);
  EXPECT_EQ(recs[1].root, 2);
  EXPECT_EQ(recs[1].seq, 2u);
  EXPECT_EQ(recs[1].state, TraceState::Started);
  EXPECT_EQ(recs[1].waitRound, 1);
  EXPECT_EQ(recs[1].waitPeer, 2);
  EXPECT_TRUE(recs[2].p2p);
  EXPECT_EQ(recs[2].seq, 1u);  // batches have their own numbers
  EXPECT_EQ(recs[2].state, TraceState::Failed);
  EXPECT_EQ(recs[2].count, 3u);    // operations
  EXPECT_EQ(recs[2].bytes, 100u);  // sent
  EXPECT_EQ(recs[1].bytes, 40u);   // 5 int64
  EXPECT_EQ(recs[0].waitRound, -1);

  nlohmann::json j = nlohmann::json::parse(r.toJson("signal"));
  EXPECT_EQ(j["schema"], "conflux.trace");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["reason"], "signal");
  EXPECT_EQ(j["comm"]["rank"], 1);
  EXPECT_EQ(j["comm"]["nranks"], 3);
  EXPECT_TRUE(j["error"].is_null());
  ASSERT_EQ(j["entries"].size(), 3u);
  EXPECT_EQ(j["entries"][0]["algorithm"], "ring");
  EXPECT_EQ(j["entries"][0]["state"], "completed");
  EXPECT_TRUE(j["entries"][0].contains("duration_us"));
  EXPECT_EQ(j["entries"][0]["queued_ns"], j["entries"][0]["start_ns"]);  // one tick, one time
  EXPECT_LE(j["entries"][0]["start_ns"].get<int64_t>(), j["entries"][0]["end_ns"].get<int64_t>());
  EXPECT_EQ(j["entries"][1]["collective"], "broadcast");
  EXPECT_EQ(j["entries"][1]["waited"]["round"], 2);  // 1-based in the dump
  EXPECT_EQ(j["entries"][1]["waited"]["peer"], 2);
  EXPECT_FALSE(j["entries"][1].contains("end_ns"));
  EXPECT_EQ(j["entries"][2]["kind"], "p2p");
}

TEST(FlightRecorder, ErrorAndEscapedTextSurviveTheDump) {
  FlightRecorder r(rankIdentity(0, 2), 4, "");
  r.noteError(Status(Code::Timeout, "no progress \"quoted\"\n\ttab \\ back \x01"), 1);
  r.noteError(Status(Code::RemoteError, "second error is ignored"), 0);
  nlohmann::json j = nlohmann::json::parse(r.toJson("timeout"));
  EXPECT_EQ(j["error"]["code"], "timeout");
  EXPECT_EQ(j["error"]["message"], "no progress \"quoted\"\n\ttab \\ back \x01");
  EXPECT_EQ(j["error"]["failed_rank"], 1);
}

TEST(FlightRecorder, EmptyRingRecordsNothingAndDumpsNothing) {
  TempDir dir;
  FlightRecorder r(rankIdentity(0, 1), 0, dir.path().string());
  call(r, 8);
  EXPECT_TRUE(r.snapshot().empty());
  EXPECT_FALSE(r.dump("error"));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(FlightRecorder, DumpReplacesTheRankFileAtomically) {
  TempDir dir;
  FlightRecorder r(rankIdentity(3, 4, "abc123"), 16, (dir.path() / "sub").string());
  call(r, 8);
  ASSERT_TRUE(r.dump("error"));
  call(r, 9);
  ASSERT_TRUE(r.dump("destroy"));
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() / "sub")) names.push_back(e.path().filename());
  ASSERT_EQ(names.size(), 1u) << "no temporary file is left behind";
  EXPECT_EQ(names[0], "abc123.rank3.json");
  std::ifstream in(dir.path() / "sub" / names[0]);
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["reason"], "destroy");
  EXPECT_EQ(j["entries"].size(), 2u);
}

TEST(FlightRecorder, ReadersNeverSeeATornEntry) {
  // The call thread writes entries whose fields agree (count = 3 seq, root = seq mod 1000); a reader snapshots
  // concurrently and checks that every record it gets is consistent.
  FlightRecorder r(rankIdentity(0, 1), 8, "");
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> checked{0}, torn{0};
  std::thread reader([&] {
    while (!stop.load()) {
      for (const TraceRecord& rec : r.snapshot()) {
        if (rec.seq == 0) continue;
        ++checked;
        if (rec.count != 3 * rec.seq || rec.bytes != 12 * rec.seq || rec.root != static_cast<int>(rec.seq % 1000)) ++torn;
      }
    }
  });
  // At least 200000 calls, and on until the reader has checked a thousand records: on a loaded machine
  // the reader thread may not run at all while the first 200000 calls are written (bounded at 30 s).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (uint64_t i = 1; i <= 200000 || (checked.load() < 1000 && std::chrono::steady_clock::now() < deadline);
       ++i) {
    const uint64_t t = ticksNow();
    TraceCursor c = r.begin(Collective::AllReduce, DataType::Float32, RedOp::Sum, static_cast<int>(i % 1000), 3 * i, t, t);
    c.noteWait(0, static_cast<int>(i % 7));
    FlightRecorder::end(c, true, ticksNow());
  }
  stop = true;
  reader.join();
  EXPECT_GT(checked.load(), 0u);
  EXPECT_EQ(torn.load(), 0u);
}

// ---- conflux-trace's analysis on dumps made by recorders ----

TEST(TraceAnalysis, NamesTheRankThatNeverJoined) {
  // Ranks 0 and 2 made 5 calls and wait in the 6th for rank 1, which completed only 5 and is stopped.
  std::vector<std::unique_ptr<FlightRecorder>> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(std::make_unique<FlightRecorder>(rankIdentity(r, 3), 16, ""));
  for (auto& r : ranks) {
    for (int i = 0; i < 5; ++i) call(*r, 64);
  }
  for (int r : {0, 2}) {
    const uint64_t t = ticksNow();
    TraceCursor c = ranks[r]->begin(Collective::AllReduce, DataType::Float32, RedOp::Sum, 0, 64, t, t);
    c.noteWait(0, 1);
    FlightRecorder::end(c, false, ticksNow());
    ranks[r]->noteError(Status(Code::Timeout, "no progress"), 1);
  }
  std::vector<trace::RankDump> dumps{reparse(*ranks[0]), reparse(*ranks[1], "signal"), reparse(*ranks[2])};
  auto reports = trace::analyze(dumps);
  ASSERT_EQ(reports.size(), 1u);
  const auto& rep = reports[0];
  EXPECT_EQ(rep.lastCommon, 5u);
  EXPECT_EQ(rep.divergedAt, 6u);
  EXPECT_EQ(rep.ranks[1].state, "not joined");
  EXPECT_EQ(rep.ranks[0].state, "failed");
  EXPECT_EQ(rep.ranks[0].waitPeer, 1);
  ASSERT_FALSE(rep.suspects.empty());
  EXPECT_EQ(rep.suspects[0], 1);
  EXPECT_TRUE(rep.mismatch.empty());
  ASSERT_TRUE(rep.firstError.has_value());
  EXPECT_EQ(rep.firstError->code, "timeout");
  const std::string text = trace::toText(reports);
  EXPECT_NE(text.find("diverged at call #6"), std::string::npos) << text;
  EXPECT_NE(text.find("suspect: rank 1"), std::string::npos) << text;
  EXPECT_EQ(trace::toJson(reports)[0]["suspects"][0]["rank"], 1);
}

TEST(TraceAnalysis, AMissingDumpWaitedForIsTheSuspect) {
  std::vector<std::unique_ptr<FlightRecorder>> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(std::make_unique<FlightRecorder>(rankIdentity(r, 4), 16, ""));
  for (int r : {0, 1, 3}) {
    call(*ranks[r], 8);
    const uint64_t t = ticksNow();
    TraceCursor c = ranks[r]->begin(Collective::AllReduce, DataType::Float32, RedOp::Sum, 0, 8, t, t);
    c.noteWait(0, r == 3 ? 0 : 2);  // rank 3 waits for rank 0, which waits for rank 2
    FlightRecorder::end(c, false, ticksNow());
  }
  auto reports = trace::analyze({reparse(*ranks[0]), reparse(*ranks[1]), reparse(*ranks[3])});
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].missing, std::vector<int>{2});
  EXPECT_EQ(reports[0].divergedAt, 2u);
  ASSERT_FALSE(reports[0].suspects.empty());
  EXPECT_EQ(reports[0].suspects[0], 2);
}

TEST(TraceAnalysis, ArgumentsThatDifferNameTheOddRank) {
  std::vector<std::unique_ptr<FlightRecorder>> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(std::make_unique<FlightRecorder>(rankIdentity(r, 3), 16, ""));
  for (int r = 0; r < 3; ++r) {
    call(*ranks[r], 10);
    call(*ranks[r], r == 2 ? 20 : 30, true, false);
  }
  auto reports = trace::analyze({reparse(*ranks[0]), reparse(*ranks[1]), reparse(*ranks[2])});
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].mismatch.find("call #2"), std::string::npos) << reports[0].mismatch;
  EXPECT_NE(reports[0].mismatch.find("rank 2 called allreduce 20 x float32 sum"), std::string::npos)
      << reports[0].mismatch;
  ASSERT_FALSE(reports[0].suspects.empty());
  EXPECT_EQ(reports[0].suspects[0], 2);
}

TEST(TraceAnalysis, RanksThatAgreeEverywhereHaveNoDivergence) {
  std::vector<std::unique_ptr<FlightRecorder>> ranks;
  for (int r = 0; r < 2; ++r) ranks.push_back(std::make_unique<FlightRecorder>(rankIdentity(r, 2), 4, ""));
  for (auto& r : ranks) {
    for (int i = 0; i < 9; ++i) call(*r, 4);  // the ring wrapped: the analysis sees calls 6..9
  }
  auto reports = trace::analyze({reparse(*ranks[0]), reparse(*ranks[1])});
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].divergedAt, 0u);
  EXPECT_EQ(reports[0].lastCommon, 9u);
  EXPECT_TRUE(reports[0].suspects.empty());
}

TEST(TraceAnalysis, RejectsOtherSchemasAndBadRanks) {
  EXPECT_THROW(trace::parseDump(nlohmann::json{{"schema", "other"}}, "f"), std::runtime_error);
  nlohmann::json j = nlohmann::json::parse(FlightRecorder(rankIdentity(0, 1), 2, "").toJson("error"));
  j["version"] = 2;
  EXPECT_THROW(trace::parseDump(j, "f"), std::runtime_error);
  j["version"] = 1;
  j["comm"]["rank"] = 5;
  try {
    trace::parseDump(j, "dump.json");
    FAIL() << "an out-of-range rank was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("dump.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("rank"), std::string::npos);
  }
}

TEST(TraceAnalysis, RanksThatAllWaitAcrossNodesPointAtTheNetwork) {
  // Nodes {0, 1} and {2, 3}; every rank is in call #2 waiting for its partner on the other node.
  std::vector<std::unique_ptr<FlightRecorder>> ranks;
  for (int r = 0; r < 4; ++r) {
    TraceIdentity id = rankIdentity(r, 4);
    id.node = r / 2;
    id.nodes = 2;
    ranks.push_back(std::make_unique<FlightRecorder>(id, 8, ""));
    call(*ranks[r], 8);
    const uint64_t t = ticksNow();
    TraceCursor c = ranks[r]->begin(Collective::AllReduce, DataType::Float32, RedOp::Sum, 0, 8, t, t);
    c.noteWait(1, (r + 2) % 4);
    FlightRecorder::end(c, false, ticksNow());
  }
  std::vector<trace::RankDump> dumps;
  for (auto& r : ranks) dumps.push_back(reparse(*r));
  auto reports = trace::analyze(dumps);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].network.find("network between nodes 0 1"), std::string::npos) << reports[0].network;

  // Rank 3 waits for rank 2 of its own node, which finished the call: a rank, not the network, may be at fault.
  TraceIdentity id2 = rankIdentity(2, 4), id3 = rankIdentity(3, 4);
  id2.node = id3.node = 1;
  FlightRecorder two(id2, 8, ""), three(id3, 8, "");
  call(two, 8);
  call(two, 8);
  call(three, 8);
  const uint64_t t = ticksNow();
  TraceCursor c = three.begin(Collective::AllReduce, DataType::Float32, RedOp::Sum, 0, 8, t, t);
  c.noteWait(1, 2);
  dumps[2] = reparse(two);
  dumps[3] = reparse(three);
  EXPECT_TRUE(trace::analyze(dumps)[0].network.empty()) << trace::analyze(dumps)[0].network;
}

// A call of `r` left in progress, blocked waiting for `peer`.
void waitIn(FlightRecorder& r, int peer) {
  const uint64_t t = ticksNow();
  TraceCursor c = r.begin(Collective::AllReduce, DataType::Float32, RedOp::Sum, 0, 8, t, t);
  c.noteWait(0, peer);
}

TEST(TraceAnalysis, AChainOfWaitsPointsAtItsEnd) {
  // Ranks 1..4 wait for rank 0 (their node's leader), which waits for rank 5, which never joined.
  std::vector<std::unique_ptr<FlightRecorder>> ranks;
  std::vector<trace::RankDump> dumps;
  for (int r = 0; r < 6; ++r) {
    ranks.push_back(std::make_unique<FlightRecorder>(rankIdentity(r, 6), 8, ""));
    call(*ranks[r], 8);
    if (r < 5) waitIn(*ranks[r], r == 0 ? 5 : 0);
    dumps.push_back(reparse(*ranks[r]));
  }
  auto rep = trace::analyze(dumps).at(0);
  ASSERT_GE(rep.suspects.size(), 1u);
  EXPECT_EQ(rep.suspects[0], 5) << trace::toText({rep});
  EXPECT_EQ(rep.suspects.size(), 1u) << "the leader in the middle of the chain is not a suspect: " << trace::toText({rep});
}

TEST(TraceAnalysis, RanksWithoutCollectivesAndBadPeersAreNotSuspects) {
  // Rank 2's ring holds point-to-point batches only; rank 1 claims to wait for rank 9 of 3; ranks 0 and
  // 1 disagree on call #2.
  FlightRecorder r0(rankIdentity(0, 3), 8, ""), r1(rankIdentity(1, 3), 8, ""), r2(rankIdentity(2, 3), 8, "");
  call(r0, 8);
  call(r0, 16);
  call(r1, 8);
  waitIn(r1, 9);
  const uint64_t t = ticksNow();
  FlightRecorder::end(r2.beginP2p(2, 64, t, t), true, ticksNow());
  auto rep = trace::analyze({reparse(r0), reparse(r1), reparse(r2)}).at(0);
  EXPECT_EQ(rep.ranks[2].state, "no calls recorded");
  EXPECT_EQ(rep.ranks[1].waitPeer, -1);
  EXPECT_EQ(rep.divergedAt, 2u);
  EXPECT_NE(rep.mismatch.find("call #2"), std::string::npos) << rep.mismatch;
  for (int s : rep.suspects) {
    EXPECT_NE(s, 2) << trace::toText({rep});
    EXPECT_LT(s, 3);
  }
}

TEST(TraceAnalysis, ARankAheadOfItsRingCompletedTheCall) {
  // Rank 1 ran 10 calls with a ring of 4 (it holds 7..10); rank 0 is stuck in call #3.
  FlightRecorder r0(rankIdentity(0, 2), 8, ""), r1(rankIdentity(1, 2), 4, "");
  call(r0, 8);
  call(r0, 8);
  waitIn(r0, 1);
  for (int i = 0; i < 10; ++i) call(r1, 8);
  auto rep = trace::analyze({reparse(r0), reparse(r1)}).at(0);
  EXPECT_EQ(rep.divergedAt, 3u);
  EXPECT_EQ(rep.ranks[1].state, "completed");
  EXPECT_TRUE(rep.mismatch.empty()) << rep.mismatch;
}

TEST(TraceAnalysis, SignalDumpsAndSizeConflictsAreQualified) {
  FlightRecorder r0(rankIdentity(0, 2), 8, ""), r1(rankIdentity(1, 2), 8, ""), odd(rankIdentity(1, 3), 8, "");
  call(r0, 8);
  call(r0, 8);
  call(r1, 8);
  auto rep = trace::analyze({reparse(r0, "signal"), reparse(r1, "signal")}).at(0);
  EXPECT_EQ(rep.divergedAt, 2u);
  EXPECT_NE(rep.note.find("SIGUSR1"), std::string::npos);
  rep = trace::analyze({reparse(r0), reparse(odd)}).at(0);
  EXPECT_NE(rep.conflict.find("disagree on the communicator's size"), std::string::npos);
  EXPECT_NE(trace::toText({rep}).find("warning:"), std::string::npos);
}
