// conflux-perf: facts about this machine and process for the report: host name, CPU model, core count,
// this process's CPU affinity, pinning, and the launcher's local rank.
#pragma once

#include <string>

namespace cfxperf {

std::string hostName();
std::string cpuModel();   ///< "model name" from /proc/cpuinfo, or "unknown CPU"
int onlineCores();
/// The cores this process may run on, as "3" or "0-1" or "0,2-3".
std::string affinityList();
/// Pins the calling process to one core; returns false (and leaves it as is) on failure.
bool pinToCore(int core);
/// The launcher's local rank (Open MPI, PMI, Slurm, torchrun, CONFLUX_LOCAL_RANK), or -1 when unknown.
int launcherLocalRank();
/// True when a launcher's rank variables are set (what cfxCommInitFromEnv would use).
bool launcherEnvPresent();

}  // namespace cfxperf
