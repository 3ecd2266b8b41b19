// The topology model: bus ids, CPU lists, PCI and NUMA distances, fabric domain matching, validation.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/topology/nic_assignment.h"
#include "core/topology/topology.h"
#include "test_topology_util.h"

using namespace conflux;
using namespace conflux::topo;
using conflux::topo::test::fixture;

TEST(TopoModel, BusIdsAreNormalized) {
  EXPECT_EQ(normalizeBusId("10:1B.0"), "0000:10:1b.0");
  EXPECT_EQ(normalizeBusId("0001:A0:1d.7"), "0001:a0:1d.7");
  for (const char* bad : {"10:1b", "", "0000:10:20.0", "0000:100:00.0", "0000:10:1b.8", "x0:00.0", "10:1b.0 "}) {
    try {
      normalizeBusId(bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(TopoModel, CpuListsRoundTrip) {
  EXPECT_EQ(parseCpuList("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parseCpuList("5,1-2,2"), (std::vector<int>{1, 2, 5}));
  EXPECT_EQ(formatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(formatCpuList({}), "");
  EXPECT_TRUE(parseCpuList("").empty());
  for (const char* bad : {"3-1", "a", "1,", ",1", "1-", "1--2", "1 ,2"}) {
    EXPECT_THROW(parseCpuList(bad), Error) << bad;
  }
}

TEST(TopoModel, PciDistanceOnP4d) {
  Machine m = fixture("p4d-like");
  EXPECT_EQ(pciDistance(m, "0000:10:1c.0", "0000:10:1c.0"), 0);
  EXPECT_EQ(pciDistance(m, "0000:10:1c.0", "0000:0f:00.0"), 1);   // GPU 0 to its switch
  EXPECT_EQ(pciDistance(m, "0000:10:1c.0", "0000:10:1d.0"), 2);   // GPU 0 to GPU 1, same switch
  EXPECT_EQ(pciDistance(m, "0000:10:1c.0", "10:1B.0"), 2);         // GPU 0 to its EFA
  EXPECT_EQ(pciDistance(m, "0000:10:1c.0", "0000:20:1b.0"), 6);    // through the CPU
  EXPECT_EQ(pciDistance(m, "pci0000:0f", "pci0000:1f"), 2);        // two host bridges meet at the CPU
  EXPECT_EQ(pciDistance(m, "0000:a0:1d.0", "0000:00:06.0"), 5);    // GPU 7 to the ENA on the root bus
  try {
    pciDistance(m, "0000:10:1c.0", "0000:77:00.0");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("0000:77:00.0"), std::string::npos);
  }
}

TEST(TopoModel, PciDistanceOnP5) {
  Machine m = fixture("p5-like");
  EXPECT_EQ(pciDistance(m, "0000:4f:00.0", "0000:50:00.0"), 4);    // GPU 0 and an EFA: two downstream ports
  EXPECT_EQ(pciDistance(m, "0000:4f:00.0", "0000:53:00.0"), 4);
  EXPECT_EQ(pciDistance(m, "0000:4f:00.0", "0000:61:00.0"), 10);   // next switch, through the CPU
  EXPECT_EQ(pciDistance(m, "pci0000:4c", "0000:4f:00.0"), 4);
}

TEST(TopoModel, NumaDistancesAndCpus) {
  Machine m = fixture("p4d-like");
  EXPECT_EQ(numaDistance(m, 0, 1), 21);
  EXPECT_EQ(numaDistance(m, 1, 1), 10);
  EXPECT_EQ(numaDistance(m, -1, 1), 10);
  EXPECT_EQ(numaNodesOfCpus(m, {5, 30}), (std::vector<int>{0, 1}));
  EXPECT_EQ(numaNodesOfCpus(m, {50}), (std::vector<int>{0}));
  EXPECT_EQ(numaNodesOfCpus(m, {95}), (std::vector<int>{1}));
  EXPECT_TRUE(numaNodesOfCpus(m, {}).empty());
  m.numaDistances.clear();
  EXPECT_EQ(numaDistance(m, 0, 1), 20);
  EXPECT_EQ(numaDistance(m, 0, 0), 10);
}

TEST(TopoModel, FabricDomainsMatchByBusId) {
  Machine m = fixture("p4d-like");
  int n = matchFabricDomains(m, {{"rdmap16s27-rdm", "0000:10:1b.0"},
                                 {"rdmap144s27-rdm", "90:1B.0"},
                                 {"no-bus", ""},
                                 {"elsewhere", "0000:99:00.0"}});
  EXPECT_EQ(n, 2);
  ASSERT_EQ(m.nics.size(), 5u);
  EXPECT_EQ(m.nics[0].fabricDomain, "");
  EXPECT_EQ(m.nics[1].fabricDomain, "rdmap16s27-rdm");
  EXPECT_EQ(m.nics[2].fabricDomain, "");
  EXPECT_EQ(m.nics[3].fabricDomain, "rdmap144s27-rdm");
  EXPECT_EQ(railNics(m), (std::vector<int>{1, 3}));
  EXPECT_EQ(matchFabricDomains(m, {}), 0);
  EXPECT_EQ(m.nics[1].fabricDomain, "");
}

TEST(TopoModel, ValidateNamesTheField) {
  Machine m = fixture("p5-like");
  m.nics[3].pciBusId = "0000:55:00.0";
  try {
    validate(m, "test machine");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_EQ(std::string(e.what()), "test machine: field 'nics[3].pciBusId': '0000:55:00.0' is not in the PCI tree");
  }
  m = fixture("p5-like");
  std::swap(m.gpus[0], m.gpus[1]);
  EXPECT_THROW(validate(m, "x"), Error);
  m = fixture("p5-like");
  m.gpus[2].numaNode = 7;
  EXPECT_THROW(validate(m, "x"), Error);
}

TEST(TopoModel, DescribeListsDevices) {
  std::string text = describe(fixture("p4d-like"));
  EXPECT_NE(text.find("2 sockets, 48 cores, 96 CPUs (0-95)"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU 7: NVIDIA A100-SXM4-40GB, NUMA 1, PCI pci0000:9f > 0000:9f:00.0 > 0000:a0:1d.0"),
            std::string::npos) << text;
  EXPECT_NE(text.find("NIC 1: rdmap16s27 (rdma), 100 Gbit/s, NUMA 0"), std::string::npos) << text;
}
