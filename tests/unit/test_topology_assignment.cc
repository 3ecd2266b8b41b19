// NIC assignment and rail grouping on the fixtures, with exact expected assignments.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/topology/nic_assignment.h"
#include "test_topology_util.h"

using namespace conflux;
using namespace conflux::topo;
using conflux::topo::test::fixture;
using Rails = std::vector<std::vector<int>>;

namespace {

std::vector<RankLocality> onGpus(std::initializer_list<int> gpus) {
  std::vector<RankLocality> out;
  for (int g : gpus) out.push_back({g, {}});
  return out;
}

std::vector<int> range(int from, int to) {
  std::vector<int> out;
  for (int i = from; i < to; ++i) out.push_back(i);
  return out;
}

std::vector<std::string> railNames(const Machine& m, const NicAssignment& a) {
  std::vector<std::string> out;
  for (int i : a.railNics) out.push_back(m.nics[static_cast<size_t>(i)].name);
  return out;
}

}  // namespace

TEST(TopoAssign, P4dEightRanksShareEachNicInPairs) {
  Machine m = fixture("p4d-like");
  NicAssignment a = assignNics(m, defaultLocalities(m, 8));
  EXPECT_EQ(a.railNics, (std::vector<int>{1, 2, 3, 4}));  // the ENA (nics[0]) is not a rail
  EXPECT_EQ(railNames(m, a), (std::vector<std::string>{"rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"}));
  EXPECT_EQ(a.rankRails, (Rails{{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}}));
  EXPECT_EQ(ranksPerRail(a), (Rails{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
}

TEST(TopoAssign, P4dFewerRanksKeepTheirNearestNic) {
  Machine m = fixture("p4d-like");
  NicAssignment a = assignNics(m, onGpus({0, 2, 5}));
  EXPECT_EQ(a.rankRails, (Rails{{0}, {1}, {2}}));
  EXPECT_EQ(ranksPerRail(a), (Rails{{0}, {1}, {2}, {}}));
  EXPECT_EQ(assignNics(m, onGpus({7})).rankRails, (Rails{{3}}));
}

TEST(TopoAssign, P4dCpuRanksUseTheirSocketsNics) {
  Machine m = fixture("p4d-like");
  // Two ranks bound to socket 0 CPUs, two to socket 1 CPUs: each pair splits its socket's two NICs.
  std::vector<RankLocality> ranks = {{-1, {0, 1}}, {-1, {48}}, {-1, {24}}, {-1, {72, 73}}};
  EXPECT_EQ(assignNics(m, ranks).rankRails, (Rails{{0}, {1}, {2}, {3}}));
  // The default launch without GPUs: one rank per NUMA node.
  m.gpus.clear();
  EXPECT_EQ(assignNics(m, defaultLocalities(m, 2)).rankRails, (Rails{{0, 1}, {2, 3}}));
}

TEST(TopoAssign, UnboundRanksSpreadOverAllNics) {
  Machine m = fixture("p4d-like");
  EXPECT_EQ(assignNics(m, std::vector<RankLocality>(2)).rankRails, (Rails{{0, 1}, {2, 3}}));
  EXPECT_EQ(assignNics(m, std::vector<RankLocality>(3)).rankRails, (Rails{{0}, {1}, {2, 3}}));
  NicAssignment six = assignNics(m, std::vector<RankLocality>(6));
  EXPECT_EQ(six.rankRails, (Rails{{0}, {1}, {2}, {3}, {0}, {1}}));
  EXPECT_EQ(ranksPerRail(six), (Rails{{0, 4}, {1, 5}, {2}, {3}}));
}

TEST(TopoAssign, P5EightRanksGetFourNicsEach) {
  Machine m = fixture("p5-like");
  NicAssignment a = assignNics(m, defaultLocalities(m, 8));
  EXPECT_EQ(a.railNics, range(1, 33));
  ASSERT_EQ(a.rankRails.size(), 8u);
  for (int g = 0; g < 8; ++g) EXPECT_EQ(a.rankRails[static_cast<size_t>(g)], range(4 * g, 4 * g + 4)) << "rank " << g;
  Rails perRail = ranksPerRail(a);
  ASSERT_EQ(perRail.size(), 32u);
  for (int r = 0; r < 32; ++r) EXPECT_EQ(perRail[static_cast<size_t>(r)], (std::vector<int>{r / 4})) << "rail " << r;
  EXPECT_EQ(m.nics[static_cast<size_t>(a.railNics[a.rankRails[1][0]])].name, "rdmap97s0");
}

TEST(TopoAssign, P5FewerAndMoreRanksThanGpus) {
  Machine m = fixture("p5-like");
  EXPECT_EQ(assignNics(m, onGpus({3, 6})).rankRails, (Rails{range(12, 16), range(24, 28)}));
  // Two ranks per GPU (ranks i and i+8 share GPU i): each takes half of its switch's NICs.
  NicAssignment a = assignNics(m, defaultLocalities(m, 16));
  EXPECT_EQ(a.rankRails[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(a.rankRails[8], (std::vector<int>{2, 3}));
  EXPECT_EQ(a.rankRails[7], (std::vector<int>{28, 29}));
  EXPECT_EQ(a.rankRails[15], (std::vector<int>{30, 31}));
  // CPU ranks, one per socket: the 16 NICs of their socket.
  m.gpus.clear();
  EXPECT_EQ(assignNics(m, defaultLocalities(m, 2)).rankRails, (Rails{range(0, 16), range(16, 32)}));
}

TEST(TopoAssign, VmRanksShareItsOnlyNic) {
  Machine m = fixture("vm-2core");
  NicAssignment a = assignNics(m, defaultLocalities(m, 2));
  EXPECT_EQ(railNames(m, a), (std::vector<std::string>{"eth0"}));  // no RDMA NIC: plain NICs are rails
  EXPECT_EQ(a.rankRails, (Rails{{0}, {0}}));
  EXPECT_EQ(ranksPerRail(a), (Rails{{0, 1}}));
}

TEST(TopoAssign, NoNicsGivesEmptyLists) {
  Machine m = fixture("p5-like");
  m.nics.clear();
  NicAssignment a = assignNics(m, defaultLocalities(m, 8));
  EXPECT_TRUE(a.railNics.empty());
  EXPECT_EQ(a.rankRails, Rails(8));
  EXPECT_TRUE(ranksPerRail(a).empty());
  EXPECT_TRUE(assignNics(m, {}).rankRails.empty());
}

TEST(TopoAssign, MatchedFabricDomainsChooseTheRails) {
  Machine m = fixture("p4d-like");
  matchFabricDomains(m, {{"rdmap16s27-rdm", "0000:10:1b.0"}, {"rdmap144s27-rdm", "0000:90:1b.0"}});
  NicAssignment a = assignNics(m, defaultLocalities(m, 8));
  EXPECT_EQ(a.railNics, (std::vector<int>{1, 3}));
  // GPUs 2 and 3 have no NIC behind their switch: the one on their socket beats the one across it.
  EXPECT_EQ(a.rankRails, (Rails{{0}, {0}, {0}, {0}, {1}, {1}, {1}, {1}}));
}

TEST(TopoAssign, BadGpuIndexNamesTheRank) {
  Machine m = fixture("p4d-like");
  try {
    assignNics(m, onGpus({0, 8}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("local rank 1 has GPU 8"), std::string::npos) << e.what();
  }
}

TEST(TopoAssign, RankFabricDomainsAreTheDomainsOfItsRails) {
  Machine m = fixture("p5-like");
  // The provider's domains, one per EFA NIC, named like EFA's ("<device>-rdm"), matched by bus id.
  std::vector<FabricDomain> domains;
  for (const Nic& n : m.nics) {
    if (n.rdma) domains.push_back({n.name + "-rdm", n.pciBusId});
  }
  ASSERT_EQ(matchFabricDomains(m, domains), 32);
  NicAssignment a = assignNics(m, defaultLocalities(m, 8));
  for (int rank = 0; rank < 8; ++rank) {
    std::vector<std::string> expect;
    for (int rail : a.rankRails[static_cast<size_t>(rank)]) {
      expect.push_back(m.nics[static_cast<size_t>(a.railNics[static_cast<size_t>(rail)])].name + "-rdm");
    }
    EXPECT_EQ(rankFabricDomains(m, a, rank), expect) << "rank " << rank;
    EXPECT_EQ(expect.size(), 4u);
  }
  EXPECT_EQ(rankFabricDomains(m, a, 1).front(), "rdmap97s0-rdm");
  EXPECT_TRUE(rankFabricDomains(m, a, 8).empty());
  EXPECT_TRUE(rankFabricDomains(m, a, -1).empty());
}

TEST(TopoAssign, RankFabricDomainsEmptyWithoutMatchedDomains) {
  // The VM: a virtio NIC with no libfabric domain on its PCI address (tcp gives none).
  Machine vm = fixture("vm-2core");
  NicAssignment a = assignNics(vm, defaultLocalities(vm, 2));
  EXPECT_TRUE(rankFabricDomains(vm, a, 0).empty());
  EXPECT_TRUE(rankFabricDomains(vm, a, 1).empty());
  // p4d with only two of its four EFA NICs matched: ranks on the others get nothing from them.
  Machine m = fixture("p4d-like");
  ASSERT_EQ(matchFabricDomains(m, {{"efa-a", m.nics[1].pciBusId}, {"efa-b", m.nics[3].pciBusId}}), 2);
  NicAssignment p = assignNics(m, defaultLocalities(m, 8));
  EXPECT_EQ(rankFabricDomains(m, p, 0), (std::vector<std::string>{"efa-a"}));
}
