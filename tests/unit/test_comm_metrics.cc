// A communicator's metrics (src/comm_metrics.h) and the sink that turns them into the exposition format
// (core/metrics/sink.h): size classes, duration buckets, the bytes a call counts as, families merged
// across sources, and the textfile path's expansion.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "algorithms/plan.h"
#include "core/metrics/service.h"
#include "core/ticks.h"
#include "src/comm_metrics.h"

using namespace conflux;

namespace {

uint64_t ticksFor(double us) { return static_cast<uint64_t>(us * 1e3 / processTickScale().settledNsPerTick()); }

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

CommMetrics::Setup setupOf(const std::string& name) {
  CommMetrics::Setup s;
  s.comm = name;
  s.commId = name + "-id";
  s.rank = 1;
  s.nranks = 4;
  return s;
}

}  // namespace

TEST(CommMetrics, SizeClassIsThePowerOfTwoAtOrAbove) {
  EXPECT_EQ(sizeClassOf(0), 0);
  EXPECT_EQ(sizeClassOf(1), 0);
  EXPECT_EQ(sizeClassOf(2), 1);
  EXPECT_EQ(sizeClassOf(3), 2);
  EXPECT_EQ(sizeClassOf(4), 2);
  EXPECT_EQ(sizeClassOf(5), 3);
  EXPECT_EQ(sizeClassOf(1 << 20), 20);
  EXPECT_EQ(sizeClassOf((1 << 20) + 1), 21);
  EXPECT_EQ(sizeClassOf(~uint64_t{0}), kSizeClasses - 1);
}

TEST(CommMetrics, CallBytesAreNcclTestsSize) {
  EXPECT_EQ(callBytes(Collective::AllReduce, 10, 4, 3), 40u);
  EXPECT_EQ(callBytes(Collective::Broadcast, 10, 2, 3), 20u);
  EXPECT_EQ(callBytes(Collective::AllGather, 10, 4, 3), 120u);
  EXPECT_EQ(callBytes(Collective::ReduceScatter, 10, 4, 3), 120u);
  EXPECT_EQ(callBytes(Collective::AllToAll, 10, 8, 2), 160u);
  // The inline formula is bufferSizes' larger buffer, for every collective.
  for (int c = 0; c < kNumCollectives; ++c) {
    PlanParams p;
    p.coll = static_cast<Collective>(c);
    p.nranks = 5;
    p.count = 7;
    p.eltSize = 2;
    const BufferSizes sizes = bufferSizes(p);
    EXPECT_EQ(callBytes(p.coll, 7, 2, 5), std::max(sizes.send, sizes.recv)) << collectiveName(p.coll);
  }
}

TEST(CommMetrics, DurationBucketsDoubleFromOneMicrosecond) {
  CommMetrics m(setupOf("a"));
  EXPECT_EQ(m.bucketOf(0), 0);
  EXPECT_EQ(m.bucketOf(ticksFor(0.5)), 0);
  EXPECT_EQ(m.bucketOf(ticksFor(1.5)), 1);
  EXPECT_EQ(m.bucketOf(ticksFor(3)), 2);
  EXPECT_EQ(m.bucketOf(ticksFor(1000)), 10);      // (512, 1024] us
  EXPECT_EQ(m.bucketOf(ticksFor(3e6)), 22);       // 3 s: (2.1, 4.2] s
  EXPECT_EQ(m.bucketOf(ticksFor(1e9)), kDurationBuckets);  // 1000 s: +Inf
  EXPECT_EQ(m.bucketOf(UINT64_MAX), kDurationBuckets);     // no overflow into a small bucket
}

#if CONFLUX_HAVE_METRICS
TEST(CommMetrics, SamplesOfTwoCommunicatorsShareFamilies) {
  CommMetrics a(setupOf("a")), b(setupOf("b"));
  a.began(true);
  a.completed(Collective::AllReduce, 8, ticksFor(3), 0, ticksNow());
  a.began(true);
  a.completed(Collective::AllReduce, 8, ticksFor(5), 0, ticksNow());
  b.began(true);
  b.failedCall(Code::Timeout, ticksNow());
  b.began(false);  // a point-to-point batch: no sequence number
  metrics::Sink sink;
  sink.setCommonLabels({{"rank", "1"}});
  a.collect(sink);
  b.collect(sink);
  const std::string text = sink.text();
  EXPECT_EQ(occurrences(text, "# TYPE conflux_collective_operations_total counter"), 1u) << text;
  EXPECT_EQ(occurrences(text, "# TYPE conflux_collective_duration_seconds histogram"), 1u);
  const std::string aAllReduce = "{rank=\"1\",comm=\"a\",comm_id=\"a-id\",collective=\"allreduce\"";
  EXPECT_NE(text.find("conflux_collective_operations_total" + aAllReduce + "} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("conflux_collective_bytes_total" + aAllReduce + "} 16"), std::string::npos);
  EXPECT_NE(text.find("conflux_collective_duration_seconds_bucket" + aAllReduce + ",size_class=\"8\",le=\"2e-06\"} 0"),
            std::string::npos) << text;
  EXPECT_NE(text.find("conflux_collective_duration_seconds_bucket" + aAllReduce + ",size_class=\"8\",le=\"4e-06\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("conflux_collective_duration_seconds_bucket" + aAllReduce + ",size_class=\"8\",le=\"8e-06\"} 2"),
            std::string::npos);
  EXPECT_NE(text.find("conflux_collective_duration_seconds_count" + aAllReduce + ",size_class=\"8\"} 2"), std::string::npos);
  EXPECT_NE(text.find("conflux_collective_errors_total{rank=\"1\",comm=\"b\",comm_id=\"b-id\",kind=\"timeout\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("conflux_collective_sequence{rank=\"1\",comm=\"a\",comm_id=\"a-id\"} 2"), std::string::npos);
  EXPECT_NE(text.find("conflux_collective_sequence{rank=\"1\",comm=\"b\",comm_id=\"b-id\"} 1"), std::string::npos);
  EXPECT_NE(text.find("conflux_collective_in_flight{rank=\"1\",comm=\"b\",comm_id=\"b-id\"} 1"), std::string::npos);
  // No histogram for a collective that never completed.
  EXPECT_EQ(text.find("comm=\"b\",comm_id=\"b-id\",collective=\"allreduce\",size_class"), std::string::npos);
}
#endif

TEST(MetricsService, FilePathExpandsRankAndHost) {
  EXPECT_EQ(metrics::expandPath("/var/lib/node_exporter/conflux.%r.%h.prom", 3, "n1"),
            "/var/lib/node_exporter/conflux.3.n1.prom");
  EXPECT_EQ(metrics::expandPath("a%%b%x%", 0, "h"), "a%b%x%");
  // A process no launcher names (rank unknown) writes a file of its own, not rank 0's.
  EXPECT_EQ(metrics::expandPath("c.%r.prom", -1, "h"), "c.pid" + std::to_string(getpid()) + ".prom");
}
