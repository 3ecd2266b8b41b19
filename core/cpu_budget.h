// How many CPUs the ranks on one machine can really run on at once. A waiting rank may keep polling only
// while every rank has a CPU of its own; otherwise its polls take the CPU a peer needs. The machine's
// online CPU count overstates that under a cpuset (Slurm, `taskset`, Kubernetes' static CPU manager) and
// under a cgroup CPU quota (Kubernetes `limits.cpu`, Docker `--cpus`), where a polling rank is throttled
// for the rest of the quota period. Each rank reports its affinity and its cgroup's quota at init; the
// ranks that share a machine decide from all of them alike.
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
  CpuMask& operator|=(const CpuMask& o);
};

/// What one rank reports about the CPUs it may use; plain bytes, exchanged among ranks at init.
struct CpuShare {
  CpuMask allowed;          ///< sched_getaffinity at init; empty when unknown
  int32_t quotaCpus = 0;    ///< the tightest cgroup CPU quota on the rank's path, rounded up; 0: none
  uint32_t pad = 0;
  uint64_t cgroupKey = 0;   ///< identifies the cgroup holding that quota on this machine; 0: none
};

/// This process's affinity mask (empty when the kernel has more than 1024 CPUs or will not say).
CpuMask allowedCpus();

/// The CPU quota of this process's cgroup and its ancestors, whichever is tightest: cgroup v2 `cpu.max`
/// ("QUOTA PERIOD" or "max PERIOD") or v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` (-1: none), in whole
/// CPUs rounded up, with the identity of the cgroup that sets it (device and inode of its folder).
/// `cgroupRoot` is where the hierarchy is mounted and `selfCgroup` the file listing this process's
/// cgroups; both are parameters so that tests can build a hierarchy of their own. The path /proc/self/cgroup
/// names may not exist below the mount (a container sees its own cgroup as the root): then only the
/// folders that do exist on the way up are read.
CpuShare cgroupQuota(const std::string& cgroupRoot = "/sys/fs/cgroup",
                     const std::string& selfCgroup = "/proc/self/cgroup");

/// This rank's report: allowedCpus() and cgroupQuota().
CpuShare myCpuShare();

/// How the ranks on one machine fit its CPUs, as seen by one of them.
struct CpuFit {
  int ranks = 0;          ///< ranks on the machine
  int cpus = 0;           ///< CPUs their affinities allow together (the online count where one is unknown)
  int quotaCpus = 0;      ///< the quota of this rank's cgroup; 0: none
  int ranksInQuota = 0;   ///< ranks on the machine that share that quota
  /// More ranks than CPUs, or more ranks in one quota than it allows: a rank that polls keeps a peer off
  /// the CPU, so a waiting rank should yield at once.
  bool oversubscribed() const { return ranks > cpus || (quotaCpus > 0 && ranksInQuota > quotaCpus); }
  /// One line for the init log, e.g. "4 ranks on 2 CPUs (affinity)".
  std::string describe() const;
};

/// The fit seen by `mine` among `onMachine` (every rank on the machine, `mine` included); `onlineCpus` is
/// used when a rank's affinity is unknown.
CpuFit fitOnMachine(const std::vector<CpuShare>& onMachine, const CpuShare& mine, int onlineCpus);

}  // namespace conflux
