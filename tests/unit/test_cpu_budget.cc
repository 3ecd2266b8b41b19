// The CPUs ranks may use: affinity masks, cgroup quotas read from hierarchies built in a temporary folder
// (v2 cpu.max, v1 and hybrid cfs files, nested quotas, a container's view, paths the walk must not
// follow), and the verdict the ranks on a machine reach from all their reports.
#include "core/cpu_budget.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace conflux {
namespace {

namespace fs = std::filesystem;

class CgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/conflux-cgroup-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    root_ = dir;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void write(const std::string& rel, const std::string& text) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  /// The quotas on the path `selfCgroup` (the contents of /proc/self/cgroup) names below root/fs.
  std::vector<CpuQuota> read(const std::string& selfCgroup) {
    write("self", selfCgroup);
    return cgroupQuotas((root_ / "fs").string(), (root_ / "self").string());
  }
  fs::path root_;
};

TEST_F(CgroupTree, UnifiedQuotaInThousandthsOfACpu) {
  write("fs/cgroup.controllers", "cpuset cpu io memory");
  write("fs/job/cpu.max", "250000 100000");
  const std::vector<CpuQuota> q = read("0::/job");
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].milliCpus, 2500);
  EXPECT_NE(q[0].key, 0u);
}

TEST_F(CgroupTree, UnifiedMaxMeansNoQuota) {
  write("fs/cgroup.controllers", "cpu");
  write("fs/job/cpu.max", "max 100000");
  EXPECT_TRUE(read("0::/job").empty());
}

TEST_F(CgroupTree, EveryQuotaOnThePathUpIsReportedInnermostFirst) {
  write("fs/cgroup.controllers", "cpu");
  write("fs/pod/cpu.max", "100000 100000");            // 1 CPU for the pod
  write("fs/pod/container/cpu.max", "400000 100000");  // 4 for the container: the pod binds
  write("fs/other/cpu.max", "100000 100000");
  const std::vector<CpuQuota> inPod = read("0::/pod/container/");  // a trailing slash changes nothing
  ASSERT_EQ(inPod.size(), 2u);
  EXPECT_EQ(inPod[0].milliCpus, 4000);
  EXPECT_EQ(inPod[1].milliCpus, 1000);
  const std::vector<CpuQuota> pod = read("0::/pod");
  ASSERT_EQ(pod.size(), 1u);
  EXPECT_EQ(inPod[1].key, pod[0].key) << "one folder, one key";
  const std::vector<CpuQuota> other = read("0::/other");
  ASSERT_EQ(other.size(), 1u);
  EXPECT_NE(other[0].key, pod[0].key) << "another cgroup with the same quota is another budget";
}

TEST_F(CgroupTree, AContainerSeesItsCgroupAsTheMountsRoot) {
  // /proc/self/cgroup names the host's path, which does not exist below the container's mount.
  write("fs/cgroup.controllers", "cpu");
  write("fs/cpu.max", "200000 100000");
  const std::vector<CpuQuota> q = read("0::/kubepods/pod1/abc");
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].milliCpus, 2000);
}

TEST_F(CgroupTree, APathOutsideTheNamespacesRootIsNotFollowed) {
  write("fs/cgroup.controllers", "cpu");
  write("fs/cpu.max", "100000 100000");
  write("fs/x/cpu.max", "100000 100000");
  EXPECT_TRUE(read("0::/../x").empty());
}

TEST_F(CgroupTree, VersionOneReadsTheCpuControllersFolderAndItsParents) {
  write("fs/cpu,cpuacct/slurm/job7/cpu.cfs_quota_us", "50000");
  write("fs/cpu,cpuacct/slurm/job7/cpu.cfs_period_us", "100000");
  write("fs/cpu,cpuacct/slurm/cpu.cfs_quota_us", "-1");
  write("fs/cpu,cpuacct/slurm/cpu.cfs_period_us", "100000");
  write("fs/cpu,cpuacct/cpu.cfs_quota_us", "300000");
  write("fs/cpu,cpuacct/cpu.cfs_period_us", "100000");
  const std::vector<CpuQuota> q = read("12:memory:/slurm/job7\n4:cpu,cpuacct:/slurm/job7\n0::/slurm/job7");
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].milliCpus, 500) << "half a CPU";
  EXPECT_EQ(q[1].milliCpus, 3000) << "the root's, above the slurm folder without one";
}

TEST_F(CgroupTree, HybridLayoutReadsTheVersionOneCpuFolder) {
  // systemd's hybrid mode: v1 controllers in folders, the v2 tree in unified/ without a cpu controller.
  write("fs/unified/cgroup.controllers", "");
  write("fs/cpu/job/cpu.cfs_quota_us", "150000");
  write("fs/cpu/job/cpu.cfs_period_us", "100000");
  const std::vector<CpuQuota> q = read("3:cpu:/job\n0::/job");
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].milliCpus, 1500);
}

TEST_F(CgroupTree, VersionOneContainerViewWithTheHostsPath) {
  write("fs/cpu/cpu.cfs_quota_us", "100000");
  write("fs/cpu/cpu.cfs_period_us", "100000");
  const std::vector<CpuQuota> q = read("5:cpu:/docker/0123abcd");
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].milliCpus, 1000);
}

TEST_F(CgroupTree, NoQuotaAnywhereOrNothingReadable) {
  write("fs/cgroup.controllers", "cpu");
  EXPECT_TRUE(read("0::/job").empty());
  write("fs/job/cpu.max", "garbage 100000");
  EXPECT_TRUE(read("0::/job").empty());
  write("fs/job/cpu.max", "100000 0");
  EXPECT_TRUE(read("0::/job").empty());
  EXPECT_TRUE(read("").empty());
  EXPECT_TRUE(cgroupQuotas((root_ / "missing").string(), (root_ / "missing-self").string()).empty());
}

TEST_F(CgroupTree, AHugeVersionOneQuotaStaysAFiniteNumber) {
  write("fs/cpu/cpu.cfs_quota_us", "17592186044415");  // the kernel's largest, over a 1 ms period
  write("fs/cpu/cpu.cfs_period_us", "1000");
  const std::vector<CpuQuota> q = read("1:cpu:/");
  ASSERT_EQ(q.size(), 1u);
  EXPECT_GT(q[0].milliCpus, int64_t{1} << 40);
}

TEST(CpuMaskTest, AffinityMaskMatchesTheKernelsAffinity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(affinityMask().count(), CPU_COUNT(&set));
}

CpuShare share(std::initializer_list<int> cpus, std::initializer_list<CpuQuota> quotas = {}) {
  CpuShare s;
  for (int c : cpus) s.allowed.set(c);
  size_t i = 0;
  for (const CpuQuota& q : quotas) s.quotas[i++] = q;
  return s;
}

TEST(CpuFitTest, RanksPinnedToCoresOfTheirOwnFit) {
  const CpuFit fit = fitOnMachine({share({0}), share({1})}, 64);
  EXPECT_EQ(fit.cpus, 2);
  EXPECT_FALSE(fit.oversubscribed()) << fit.describe();
}

TEST(CpuFitTest, ACpusetNarrowerThanTheMachineOversubscribes) {
  const CpuFit fit = fitOnMachine({share({4, 5}), share({4, 5}), share({4, 5})}, 64);
  EXPECT_EQ(fit.cpus, 2);
  EXPECT_TRUE(fit.oversubscribed()) << fit.describe();
  EXPECT_NE(fit.describe().find("3 ranks on 2 CPUs"), std::string::npos) << fit.describe();
}

TEST(CpuFitTest, RanksCrowdedOntoOneCpuBesideAWideMaskOversubscribe) {
  // The union (4 CPUs for 4 ranks) hides that three ranks share CPU 0.
  const CpuFit fit = fitOnMachine({share({0}), share({0}), share({0}), share({0, 1, 2, 3})}, 4);
  EXPECT_EQ(fit.cpus, 4);
  EXPECT_EQ(fit.crowdedRanks, 3);
  EXPECT_TRUE(fit.oversubscribed()) << fit.describe();
  EXPECT_NE(fit.describe().find("3 of them confined to 1 CPU"), std::string::npos) << fit.describe();
  EXPECT_FALSE(fitOnMachine({share({0}), share({1}), share({2}), share({0, 1, 2, 3})}, 4).oversubscribed());
}

TEST(CpuFitTest, AnUnknownAffinityFallsBackToTheOnlineCount) {
  EXPECT_EQ(fitOnMachine({share({0}), CpuShare{}, share({0})}, 4).cpus, 4);
  EXPECT_TRUE(fitOnMachine({share({0}), CpuShare{}, share({0})}, 2).oversubscribed());
  EXPECT_FALSE(fitOnMachine({CpuShare{}, CpuShare{}}, -1).oversubscribed()) << "nothing known: not oversubscribed";
}

TEST(CpuFitTest, AQuotaCountsTheRanksThatShareItAndEveryRankAgrees) {
  // Two pods of 2 CPUs' quota on a 64-CPU machine: 2 ranks in each fit, 3 in one do not.
  const CpuQuota pod7{7, 2000}, pod9{9, 2000};
  const std::vector<CpuShare> fits = {share({0, 1, 2, 3}, {pod7}), share({0, 1, 2, 3}, {pod7}),
                                      share({0, 1, 2, 3}, {pod9}), share({0, 1, 2, 3}, {pod9})};
  EXPECT_FALSE(fitOnMachine(fits, 64).oversubscribed());
  const CpuFit crowded = fitOnMachine({share({0, 1, 2, 3}, {pod7}), share({0, 1, 2, 3}, {pod7}),
                                       share({0, 1, 2, 3}, {pod7}), share({0, 1, 2, 3}, {pod9})},
                                      64);
  EXPECT_EQ(crowded.ranksInQuota, 3);
  EXPECT_TRUE(crowded.oversubscribed()) << crowded.describe();
  EXPECT_NE(crowded.describe().find("3 in a cgroup quota of 2 CPUs"), std::string::npos) << crowded.describe();
}

TEST(CpuFitTest, AFractionalQuotaIsNotRoundedUp) {
  const CpuQuota q{5, 1500};
  EXPECT_TRUE(fitOnMachine({share({0, 1}, {q}), share({0, 1}, {q})}, 2).oversubscribed()) << "2 ranks, 1.5 CPUs";
  EXPECT_FALSE(fitOnMachine({share({0, 1}, {q})}, 2).oversubscribed());
  EXPECT_NE(fitOnMachine({share({0, 1}, {q})}, 2).describe().find("quota of 1.5 CPUs"), std::string::npos);
}

TEST(CpuFitTest, AParentsQuotaBindsRanksInChildrenWithoutOne) {
  // A pod of 2 CPUs: container A (1 rank) has a quota of its own, container B (2 ranks) none.
  const CpuQuota podQ{1, 2000}, containerA{2, 1000};
  const CpuFit fit = fitOnMachine({share({0, 1, 2, 3}, {containerA, podQ}), share({0, 1, 2, 3}, {podQ}),
                                   share({0, 1, 2, 3}, {podQ})},
                                  64);
  EXPECT_TRUE(fit.oversubscribed()) << fit.describe();
  EXPECT_EQ(fit.ranksInQuota, 3);
}

}  // namespace
}  // namespace conflux
