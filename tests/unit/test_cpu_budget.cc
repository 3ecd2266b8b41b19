// The CPUs ranks may use: affinity masks, cgroup quotas read from a hierarchy built in a temporary folder
// (v2 cpu.max and v1 cfs files, nested, a container's view), and the verdict the ranks on a machine reach.
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
  CpuShare read(const std::string& selfCgroup) {
    write("self", selfCgroup);
    return cgroupQuota((root_ / "fs").string(), (root_ / "self").string());
  }
  fs::path root_;
};

TEST_F(CgroupTree, UnifiedQuotaRoundsUpToWholeCpus) {
  write("fs/cgroup.controllers", "cpuset cpu io memory");
  write("fs/job/cpu.max", "250000 100000");
  const CpuShare s = read("0::/job");
  EXPECT_EQ(s.quotaCpus, 3);
  EXPECT_NE(s.cgroupKey, 0u);
}

TEST_F(CgroupTree, UnifiedMaxMeansNoQuota) {
  write("fs/cgroup.controllers", "cpu");
  write("fs/job/cpu.max", "max 100000");
  const CpuShare s = read("0::/job");
  EXPECT_EQ(s.quotaCpus, 0);
  EXPECT_EQ(s.cgroupKey, 0u);
}

TEST_F(CgroupTree, TheTightestQuotaOnThePathWinsAndNamesItsFolder) {
  write("fs/cgroup.controllers", "cpu");
  write("fs/pod/cpu.max", "100000 100000");           // 1 CPU for the pod
  write("fs/pod/container/cpu.max", "400000 100000");  // 4 for the container: the pod binds
  write("fs/other/cpu.max", "100000 100000");
  const CpuShare inPod = read("0::/pod/container");
  EXPECT_EQ(inPod.quotaCpus, 1);
  const CpuShare pod = read("0::/pod");
  EXPECT_EQ(inPod.cgroupKey, pod.cgroupKey) << "both are bound by the pod's quota";
  const CpuShare other = read("0::/other");
  EXPECT_EQ(other.quotaCpus, 1);
  EXPECT_NE(other.cgroupKey, pod.cgroupKey) << "another cgroup with the same quota is another budget";
}

TEST_F(CgroupTree, AContainerSeesItsCgroupAsTheMountsRoot) {
  // /proc/self/cgroup names the host's path, which does not exist below the container's mount.
  write("fs/cgroup.controllers", "cpu");
  write("fs/cpu.max", "200000 100000");
  EXPECT_EQ(read("0::/kubepods/pod1/abc").quotaCpus, 2);
}

TEST_F(CgroupTree, VersionOneReadsTheCpuControllersFolder) {
  write("fs/cpu,cpuacct/slurm/job7/cpu.cfs_quota_us", "50000");
  write("fs/cpu,cpuacct/slurm/job7/cpu.cfs_period_us", "100000");
  write("fs/cpu,cpuacct/slurm/cpu.cfs_quota_us", "-1");
  write("fs/cpu,cpuacct/slurm/cpu.cfs_period_us", "100000");
  const CpuShare s = read("12:memory:/slurm/job7\n4:cpu,cpuacct:/slurm/job7\n0::/slurm/job7");
  EXPECT_EQ(s.quotaCpus, 1) << "half a CPU still needs one";
}

TEST_F(CgroupTree, NoQuotaAnywhereOrNothingReadable) {
  write("fs/cgroup.controllers", "cpu");
  EXPECT_EQ(read("0::/job").quotaCpus, 0);
  write("fs/job/cpu.max", "garbage");
  EXPECT_EQ(read("0::/job").quotaCpus, 0);
  EXPECT_EQ(read("").quotaCpus, 0);
  EXPECT_EQ(cgroupQuota((root_ / "missing").string(), (root_ / "missing-self").string()).quotaCpus, 0);
}

TEST(CpuMaskTest, AllowedCpusMatchesTheKernelsAffinity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(allowedCpus().count(), CPU_COUNT(&set));
}

CpuShare share(std::initializer_list<int> cpus, int quota = 0, uint64_t key = 0) {
  CpuShare s;
  for (int c : cpus) s.allowed.set(c);
  s.quotaCpus = quota;
  s.cgroupKey = key;
  return s;
}

TEST(CpuFitTest, RanksPinnedToCoresOfTheirOwnFit) {
  const std::vector<CpuShare> ranks = {share({0}), share({1})};
  const CpuFit fit = fitOnMachine(ranks, ranks[0], 64);
  EXPECT_EQ(fit.cpus, 2);
  EXPECT_FALSE(fit.oversubscribed()) << fit.describe();
}

TEST(CpuFitTest, ACpusetNarrowerThanTheMachineOversubscribes) {
  const std::vector<CpuShare> ranks = {share({4, 5}), share({4, 5}), share({4, 5})};
  const CpuFit fit = fitOnMachine(ranks, ranks[1], 64);
  EXPECT_EQ(fit.cpus, 2);
  EXPECT_TRUE(fit.oversubscribed()) << fit.describe();
  EXPECT_NE(fit.describe().find("3 ranks on 2 CPUs"), std::string::npos) << fit.describe();
}

TEST(CpuFitTest, AnUnknownAffinityFallsBackToTheOnlineCount) {
  const std::vector<CpuShare> ranks = {share({0}), CpuShare{}, share({0})};
  EXPECT_EQ(fitOnMachine(ranks, ranks[0], 4).cpus, 4);
  EXPECT_TRUE(fitOnMachine(ranks, ranks[0], 2).oversubscribed());
}

TEST(CpuFitTest, AQuotaCountsOnlyTheRanksThatShareIt) {
  // Two pods of 2 CPUs' quota on a 64-CPU machine: 2 ranks in each fit, 3 in one do not.
  const std::vector<CpuShare> fits = {share({0, 1, 2, 3}, 2, 7), share({0, 1, 2, 3}, 2, 7), share({0, 1, 2, 3}, 2, 9),
                                      share({0, 1, 2, 3}, 2, 9)};
  EXPECT_FALSE(fitOnMachine(fits, fits[0], 64).oversubscribed());
  const std::vector<CpuShare> crowded = {share({0, 1, 2, 3}, 2, 7), share({0, 1, 2, 3}, 2, 7), share({0, 1, 2, 3}, 2, 7)};
  const CpuFit fit = fitOnMachine(crowded, crowded[2], 64);
  EXPECT_EQ(fit.ranksInQuota, 3);
  EXPECT_TRUE(fit.oversubscribed()) << fit.describe();
  EXPECT_NE(fit.describe().find("quota of 2 CPUs"), std::string::npos) << fit.describe();
}

}  // namespace
}  // namespace conflux
