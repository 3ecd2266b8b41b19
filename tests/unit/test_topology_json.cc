// Topology files: round trips, the committed fixtures are canonical, and load errors name file and field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/topology/discover.h"
#include "core/topology/topology_json.h"
#include "test_topology_util.h"

using namespace conflux;
using namespace conflux::topo;
using conflux::topo::test::fixture;
using conflux::topo::test::fixturePath;

namespace {

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A file in the test's temporary directory, removed on destruction.
struct TempFile {
  explicit TempFile(const std::string& text) {
    path = testing::TempDir() + "conflux-topo-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + ".json";
    std::ofstream(path) << text;
  }
  ~TempFile() { unlink(path.c_str()); }
  std::string path;
  static inline int counter = 0;
};

// Loads @p text from a file and returns the error message (empty when it loaded).
std::string loadError(const std::string& text, std::string* path = nullptr) {
  TempFile f(text);
  if (path) *path = f.path;
  try {
    loadFile(f.path);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

// The p4d fixture's text with the first occurrence of @p from replaced by @p to.
std::string p4dWith(const std::string& from, const std::string& to) {
  std::string text = readText(fixturePath("p4d-like"));
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

}  // namespace

class TopoJsonFixture : public testing::TestWithParam<const char*> {};

TEST_P(TopoJsonFixture, RoundTripsAndIsCanonical) {
  std::string path = fixturePath(GetParam());
  Machine m = loadFile(path);
  EXPECT_EQ(fromJson(toJson(m)), m);
  // Fixtures are written by toJson (conflux-info --topology-json or the same layout), byte for byte.
  EXPECT_EQ(toJson(m), readText(path));
  TempFile out("");
  dumpFile(m, out.path);
  EXPECT_EQ(loadFile(out.path), m);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TopoJsonFixture, testing::Values("vm-2core", "p4d-like", "p5-like"));

TEST(TopoJson, FixturesHaveTheirShape) {
  Machine p4d = fixture("p4d-like"), p5 = fixture("p5-like"), vm = fixture("vm-2core");
  EXPECT_EQ(p4d.gpus.size(), 8u);
  EXPECT_EQ(p4d.nics.size(), 5u);  // 4 EFA and the ENA
  EXPECT_EQ(p4d.numa.size(), 2u);
  EXPECT_EQ(p5.gpus.size(), 8u);
  EXPECT_EQ(p5.nics.size(), 33u);  // 32 EFA and the ENA
  double efaGbps = 0;
  for (const Nic& n : p5.nics) efaGbps += n.rdma ? n.speedGbps : 0;
  EXPECT_EQ(efaGbps, 3200);
  EXPECT_EQ(vm.cores, 2);
  EXPECT_EQ(vm.numa.size(), 1u);
  EXPECT_TRUE(vm.gpus.empty());
}

TEST(TopoJson, EveryFieldRoundTrips) {
  Machine m;
  m.hostname = "h";
  m.source = "hand";
  m.packages = 2;
  m.cores = 3;
  m.cpus = {0, 1, 2, 7};
  m.numa = {{0, {0, 1}, 1024}, {3, {2, 7}, 0}};
  m.numaDistances = {{10, 17}, {17, 10}};
  m.pci = {{"pci0001:3a", -1, PciKind::HostBridge, 0, 0, 0, 0},
           {"0001:3a:00.0", 0, PciKind::Bridge, 0x1000, 0xc030, 0x0604, 31.5},
           {"0001:3b:00.0", 1, PciKind::Gpu, 0x10de, 0x2330, 0x0302, 63.0},
           {"0001:3c:00.1", 1, PciKind::Nic, 0x15b3, 0x101b, 0x0207, 15.754},
           {"0001:3d:00.0", 0, PciKind::Other, 0x144d, 0xa80a, 0x0108, 0}};
  m.gpus = {{"GPU \"quoted\"", "0001:3b:00.0", 3}};
  m.nics = {{"mlx5_0", "0001:3c:00.1", 200, -1, true, "mlx5_0"}};
  EXPECT_EQ(fromJson(toJson(m)), m);
}

TEST(TopoJson, MissingFileIsASystemError) {
  try {
    loadFile("no-such-dir/none.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::SystemError);
    EXPECT_NE(std::string(e.what()).find("'no-such-dir/none.json'"), std::string::npos) << e.what();
  }
}

TEST(TopoJson, ErrorsNameTheFileAndTheField) {
  std::string path;
  std::string msg = loadError(p4dWith("\"speedGbps\":100.0", "\"speedGbps\":\"fast\""), &path);
  EXPECT_EQ(msg, "topology file '" + path + "': field 'nics[0].speedGbps': expected a non-negative number, got \"fast\"");

  EXPECT_NE(loadError("{\"version\": 1,").find("not valid JSON"), std::string::npos);
  // Found by tests/fuzz (fuzz_topology_json): a number beyond double's range ended the process.
  EXPECT_NE(loadError("22E2222222222222").find("not valid JSON"), std::string::npos);
  EXPECT_NE(loadError("[1]").find("field '(top level)': must be an object"), std::string::npos);
  EXPECT_NE(loadError(p4dWith("\"version\": 1", "\"version\": 2")).find("field 'version': unsupported version 2"),
            std::string::npos);
  EXPECT_NE(loadError(p4dWith("\"version\": 1,", "")).find("field 'version': missing"), std::string::npos);
  EXPECT_NE(loadError(p4dWith("\"cpus\":\"24-47,72-95\"", "\"cpus\":\"24-\"")).find("field 'numa[1].cpus'"),
            std::string::npos);
  EXPECT_NE(loadError(p4dWith("\"speedGbps\"", "\"sped\"")).find("field 'nics[0].sped': unknown field"),
            std::string::npos);
  EXPECT_NE(loadError(p4dWith("\"parent\":\"pci0000:0f\"", "\"parent\":\"pci0000:0e\""))
                .find("field 'pci[3].parent': 'pci0000:0e' is not an earlier entry of pci"),
            std::string::npos);
  EXPECT_NE(loadError(p4dWith("\"kind\":\"bridge\"", "\"kind\":\"switch\"")).find("field 'pci[3].kind'"),
            std::string::npos);
  EXPECT_NE(loadError(p4dWith("\"pciBusId\":\"0000:10:1c.0\"", "\"pciBusId\":\"10:1c\"")).find("field 'gpus[0].pciBusId'"),
            std::string::npos);
  EXPECT_NE(loadError(p4dWith("\"pciBusId\":\"0000:10:1b.0\"", "\"pciBusId\":\"0000:10:1a.0\""))
                .find("field 'nics[1].pciBusId': '0000:10:1a.0' is not in the PCI tree"),
            std::string::npos);
  EXPECT_NE(loadError(p4dWith("\"numa\":1,\"rdma\"", "\"numa\":2,\"rdma\"")).find("field 'nics[3].numa'"),
            std::string::npos);
  EXPECT_NE(loadError(p4dWith("[21,10]", "[21]")).find("field 'numaDistances[1]'"), std::string::npos);
}

TEST(TopoJson, LoadTopologyReadsConfluxTopoFile) {
  setenv("CONFLUX_TOPO_FILE", fixturePath("p5-like").c_str(), 1);
  Machine m = loadTopology();
  EXPECT_EQ(m, fixture("p5-like"));
  setenv("CONFLUX_TOPO_FILE", "missing-topology.json", 1);
  try {
    loadTopology();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing-topology.json"), std::string::npos);
  }
  unsetenv("CONFLUX_TOPO_FILE");
  EXPECT_GE(loadTopology().cores, 1);
}
