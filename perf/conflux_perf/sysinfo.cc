// conflux-perf: host name, CPU model, cores, affinity and launcher variables (Linux).
#include "sysinfo.h"

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace cfxperf {

std::string hostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? "unknown CPU" : line.substr(start);
      }
    }
  }
  return "unknown CPU";
}

int onlineCores() {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::string affinityList() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "?";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int end = c;
    while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set)) ++end;
    char range[32];
    if (end > c) {
      std::snprintf(range, sizeof range, "%s%d-%d", out.empty() ? "" : ",", c, end);
    } else {
      std::snprintf(range, sizeof range, "%s%d", out.empty() ? "" : ",", c);
    }
    out.append(range);
    c = end;
  }
  return out.empty() ? "?" : out;
}

bool pinToCore(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

int launcherLocalRank() {
  for (const char* name : {"CONFLUX_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                           "LOCAL_RANK"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return -1;
}

bool launcherEnvPresent() {
  auto has = [](const char* name) { return std::getenv(name) != nullptr; };
  return (has("CONFLUX_RANK") && has("CONFLUX_NRANKS")) || has("OMPI_COMM_WORLD_RANK") || has("PMIX_RANK") ||
         (has("PMI_RANK") && has("PMI_SIZE")) || (has("SLURM_PROCID") && has("SLURM_NTASKS")) ||
         (has("RANK") && has("WORLD_SIZE"));
}

}  // namespace cfxperf
