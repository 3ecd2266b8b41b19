#include "core/cpu_budget.h"

#include <sched.h>
#include <sys/stat.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

namespace conflux {

int CpuMask::count() const {
  int n = 0;
  for (uint64_t w : words) n += std::popcount(w);
  return n;
}

CpuMask& CpuMask::operator|=(const CpuMask& o) {
  for (size_t i = 0; i < words.size(); ++i) words[i] |= o.words[i];
  return *this;
}

CpuMask allowedCpus() {
  CpuMask m;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return m;  // EINVAL: more CPUs than cpu_set_t holds
  static_assert(CPU_SETSIZE <= 64 * 16, "CpuMask holds the kernel's default mask");
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) m.set(c);
  }
  return m;
}

namespace {

std::optional<std::string> readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

bool isDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

uint64_t folderKey(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  const uint64_t key = (static_cast<uint64_t>(st.st_dev) << 40) ^ static_cast<uint64_t>(st.st_ino);
  return key == 0 ? 1 : key;
}

/// CPUs' worth of time per period the folder's quota allows; nullopt: no quota there (or unreadable).
std::optional<double> quotaIn(const std::string& folder, bool unified) {
  double quota = 0, period = 0;
  if (unified) {
    const std::optional<std::string> max = readFirstLine(folder + "/cpu.max");
    if (!max) return std::nullopt;
    std::istringstream in(*max);
    std::string q;
    if (!(in >> q >> period) || q == "max") return std::nullopt;
    try {
      quota = std::stod(q);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  } else {
    const std::optional<std::string> q = readFirstLine(folder + "/cpu.cfs_quota_us");
    const std::optional<std::string> p = readFirstLine(folder + "/cpu.cfs_period_us");
    if (!q || !p) return std::nullopt;
    try {
      quota = std::stod(*q);
      period = std::stod(*p);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  if (quota <= 0 || period <= 0) return std::nullopt;  // -1 (v1): no quota
  return quota / period;
}

/// The folder of the hierarchy holding the CPU controller and this process's path in it, from the lines
/// "ID:CONTROLLERS:PATH" of /proc/self/cgroup.
std::optional<std::pair<std::string, std::string>> cpuHierarchy(const std::string& root, const std::string& selfCgroup,
                                                                bool& unified) {
  // cgroup v2 mounts the whole hierarchy at the root; hybrid systems keep it in a subfolder and v1 its CPU controller.
  unified = readFirstLine(root + "/cgroup.controllers").has_value();
  std::ifstream in(selfCgroup);
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (unified) {
      if (line.compare(0, a, "0") == 0 && controllers.empty()) return std::make_pair(root, path);
      continue;
    }
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');) {
      if (name != "cpu") continue;
      const std::string mount = isDirectory(root + "/" + controllers) ? root + "/" + controllers : root + "/cpu";
      return std::make_pair(mount, path);
    }
  }
  return std::nullopt;
}

}  // namespace

CpuShare cgroupQuota(const std::string& cgroupRoot, const std::string& selfCgroup) {
  CpuShare out;
  bool unified = false;
  const auto hierarchy = cpuHierarchy(cgroupRoot, selfCgroup, unified);
  if (!hierarchy) return out;
  const auto& [mount, path] = *hierarchy;
  std::optional<double> tightest;
  // From the process's own folder up to the mount: a parent's quota binds its children too.
  std::string rel = path;
  while (true) {
    while (rel.size() > 1 && rel.back() == '/') rel.pop_back();
    const std::string folder = rel == "/" || rel.empty() ? mount : mount + rel;
    if (isDirectory(folder)) {
      const std::optional<double> q = quotaIn(folder, unified);
      if (q && (!tightest || *q < *tightest)) {
        tightest = q;
        out.cgroupKey = folderKey(folder);
      }
    }
    if (rel == "/" || rel.empty()) break;
    const size_t slash = rel.rfind('/');
    rel = slash == 0 || slash == std::string::npos ? "/" : rel.substr(0, slash);
  }
  if (tightest) out.quotaCpus = static_cast<int32_t>(std::ceil(*tightest - 1e-9));
  return out;
}

CpuShare myCpuShare() {
  CpuShare s = cgroupQuota();
  s.allowed = allowedCpus();
  return s;
}

CpuFit fitOnMachine(const std::vector<CpuShare>& onMachine, const CpuShare& mine, int onlineCpus) {
  CpuFit fit;
  fit.ranks = static_cast<int>(onMachine.size());
  CpuMask all;
  bool known = true;
  for (const CpuShare& s : onMachine) {
    known = known && !s.allowed.empty();
    all |= s.allowed;
    if (mine.quotaCpus > 0 && s.cgroupKey == mine.cgroupKey) ++fit.ranksInQuota;
  }
  fit.cpus = known ? all.count() : onlineCpus;
  fit.quotaCpus = mine.quotaCpus;
  return fit;
}

std::string CpuFit::describe() const {
  std::string s = std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") + " on " + std::to_string(cpus) +
                  (cpus == 1 ? " CPU" : " CPUs");
  if (quotaCpus > 0) {
    s += ", " + std::to_string(ranksInQuota) + " of them in a cgroup quota of " + std::to_string(quotaCpus) +
         (quotaCpus == 1 ? " CPU" : " CPUs");
  }
  s += oversubscribed() ? ": oversubscribed, a waiting rank yields" : ": a waiting rank polls before it blocks";
  return s;
}

}  // namespace conflux
