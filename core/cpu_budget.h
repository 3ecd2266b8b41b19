// How many CPUs the ranks on one machine can really run on at once. A waiting rank may keep polling only
// while every rank has a CPU of its own; otherwise its polls take the CPU a peer needs. The machine's
// online CPU count overstates that under a cpuset (Slurm, `taskset`, Kubernetes' static CPU manager) and
// under a cgroup CPU quota (Kubernetes `limits.cpu`, Docker `--cpus`), where a polling rank is throttled
// for the rest of the quota period. Each rank reports its affinity and the quotas on its cgroup path at
// init; the ranks that share a machine decide from all reports, so they all reach the same verdict.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace conflux {

/// A set of CPU numbers below 1024 (what the kernel's default affinity mask holds).
struct CpuMask {
  std::array<uint64_t, 16> words{};

  void set(int cpu) { words[static_cast<size_t>(cpu) / 64] |= uint64_t{1} << (cpu % 64); }
  /// CPUs in the set.
  int count() const;
  bool empty() const { return count() == 0; }
  /// Every CPU of this set is in `o`.
  bool within(const CpuMask& o) const;
  CpuMask& operator|=(const CpuMask& o);
};

/// One cgroup's CPU quota: CPU time per period, in thousandths of a CPU.
struct CpuQuota {
  uint64_t key = 0;        ///< the cgroup's folder on this machine (device and inode); 0: an unused entry
  int64_t milliCpus = 0;   ///< 2500: two and a half CPUs' time
};

/// What one rank reports about the CPUs it may use; plain bytes, exchanged among ranks at init.
struct CpuShare {
  static constexpr int kMaxQuotas = 4;
  CpuMask allowed;                                   ///< sched_getaffinity at init; empty when unknown
  std::array<CpuQuota, kMaxQuotas> quotas{};         ///< the tightest quotas on the rank's cgroup path
};

/// This process's affinity mask (empty when the kernel has more than 1024 CPUs or will not say).
CpuMask affinityMask();

/// Every CPU quota on this process's cgroup path, from its own cgroup up to the hierarchy's root: cgroup
/// v2 `cpu.max` ("QUOTA PERIOD" or "max PERIOD") or v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` (-1:
/// none). `cgroupRoot` is where the hierarchy is mounted and `selfCgroup` the file listing this process's
/// cgroups; both are parameters so that tests can build a hierarchy of their own. The path
/// /proc/self/cgroup names may not exist below the mount (a container sees its own cgroup as the root):
/// then only the folders that do exist on the way up are read. A path that leaves the namespace's root
/// ("/../x") is not followed.
std::vector<CpuQuota> cgroupQuotas(const std::string& cgroupRoot = "/sys/fs/cgroup",
                                   const std::string& selfCgroup = "/proc/self/cgroup");

/// This rank's report: affinityMask() and the kMaxQuotas tightest of cgroupQuotas().
CpuShare myCpuShare();

/// How the ranks on one machine fit its CPUs; the same for every rank that computes it from the same reports.
struct CpuFit {
  int ranks = 0;              ///< ranks on the machine
  int cpus = 0;               ///< CPUs their affinities allow together (the online count where one is unknown)
  int crowdedRanks = 0;       ///< the most ranks confined to a set of CPUs smaller than their number (0: none)
  int crowdedCpus = 0;        ///< ... and that set's CPUs
  int ranksInQuota = 0;       ///< the ranks in the most crowded cgroup quota (0: no quota)
  int64_t quotaMilliCpus = 0; ///< ... and that quota
  /// More ranks than CPUs, some ranks confined to fewer CPUs than they number, or more ranks in one
  /// cgroup than its quota allows: a rank that polls keeps a peer off the CPU, so waiting ranks yield.
  bool oversubscribed() const { return sharesCpus() || quotaBound(); }
  /// More ranks than CPUs, or some ranks confined to fewer CPUs than they number: ranks take turns on a CPU.
  bool sharesCpus() const { return ranks > cpus || crowdedRanks > 0; }
  /// More ranks in one cgroup than its quota allows: every rank's polling spends the quota all share.
  bool quotaBound() const { return quotaMilliCpus > 0 && int64_t{ranksInQuota} * 1000 > quotaMilliCpus; }
  /// One line for the init log, e.g. "4 ranks on 2 CPUs: oversubscribed, a waiting rank yields".
  std::string describe() const;
};

/// The fit of `onMachine` (the report of every rank on the machine). `onlineCpus` counts when a rank's
/// affinity is unknown (0 or less: unknown too, and then only quotas count).
CpuFit fitOnMachine(const std::vector<CpuShare>& onMachine, int onlineCpus);

}  // namespace conflux
