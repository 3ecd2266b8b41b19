// Discovery on this machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/topology/discover.h"
#include "core/topology/topology_json.h"

using namespace conflux;
using namespace conflux::topo;

namespace {

void expectSane(const Machine& m) {
  EXPECT_GE(m.cores, 1);
  EXPECT_GE(m.packages, 1);
  ASSERT_GE(m.numa.size(), 1u);
  ASSERT_FALSE(m.cpus.empty());
  EXPECT_LE(m.cores, static_cast<int>(m.cpus.size()));
  for (const NumaNode& n : m.numa) {
    for (int c : n.cpus) EXPECT_TRUE(std::binary_search(m.cpus.begin(), m.cpus.end(), c)) << c;
  }
  EXPECT_EQ(m.numaDistances.size(), m.numa.size());
  EXPECT_NO_THROW(validate(m, "discovered"));
}

std::set<std::pair<std::string, std::string>> nicIds(const Machine& m) {
  std::set<std::pair<std::string, std::string>> out;
  for (const Nic& n : m.nics) out.insert({n.name, n.pciBusId});
  return out;
}

}  // namespace

TEST(TopoDiscovery, FindsCoresAndNumaNodes) {
  Machine m = discover();
  expectSane(m);
  EXPECT_EQ(m.source.rfind(haveHwloc() ? "hwloc" : "sysfs", 0), 0u) << m.source;
  EXPECT_EQ(fromJson(toJson(m)), m);
}

TEST(TopoDiscovery, SysfsFallbackAgreesWithHwloc) {
  Machine s = discoverSysfs();
  expectSane(s);
  EXPECT_EQ(s.source, "sysfs");
  if (!haveHwloc()) GTEST_SKIP() << "built without hwloc";
  Machine h = discover();
  EXPECT_EQ(s.cpus, h.cpus);
  EXPECT_EQ(s.cores, h.cores);
  ASSERT_EQ(s.numa.size(), h.numa.size());
  for (size_t i = 0; i < s.numa.size(); ++i) {
    EXPECT_EQ(s.numa[i].id, h.numa[i].id);
    EXPECT_EQ(s.numa[i].cpus, h.numa[i].cpus);
  }
  EXPECT_EQ(nicIds(s), nicIds(h));
  ASSERT_EQ(s.gpus.size(), h.gpus.size());
  for (size_t i = 0; i < s.gpus.size(); ++i) EXPECT_EQ(s.gpus[i].pciBusId, h.gpus[i].pciBusId);
}

TEST(TopoDiscovery, ProcessCpusAreKnown) {
  std::vector<int> cpus = processCpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
}

