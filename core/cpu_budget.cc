#include "core/cpu_budget.h"

#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

namespace conflux {

int CpuMask::count() const {
  int n = 0;
  for (uint64_t w : words) n += std::popcount(w);
  return n;
}

bool CpuMask::within(const CpuMask& o) const {
  for (size_t i = 0; i < words.size(); ++i) {
    if ((words[i] & ~o.words[i]) != 0) return false;
  }
  return true;
}

CpuMask& CpuMask::operator|=(const CpuMask& o) {
  for (size_t i = 0; i < words.size(); ++i) words[i] |= o.words[i];
  return *this;
}

CpuMask affinityMask() {
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

std::optional<double> number(const std::string& s) {
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    return used == s.size() ? std::optional<double>(v) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

/// The folder's quota in thousandths of a CPU; nullopt: no quota there (or unreadable).
std::optional<int64_t> milliQuotaIn(const std::string& folder, bool unified) {
  std::optional<double> quota, period;
  if (unified) {
    const std::optional<std::string> max = readFirstLine(folder + "/cpu.max");
    if (!max) return std::nullopt;
    std::istringstream in(*max);
    std::string q, p;
    if (!(in >> q >> p) || q == "max") return std::nullopt;
    quota = number(q);
    period = number(p);
  } else {
    const std::optional<std::string> q = readFirstLine(folder + "/cpu.cfs_quota_us");
    const std::optional<std::string> p = readFirstLine(folder + "/cpu.cfs_period_us");
    if (!q || !p) return std::nullopt;
    quota = number(*q);
    period = number(*p);
  }
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;  // -1 (v1): no quota
  const double milli = std::min(*quota / *period * 1000.0, 1e15);  // v1 allows quotas of days per ms
  return std::max<int64_t>(1, std::llround(milli));
}

/// The folder of the hierarchy holding the CPU controller and this process's path in it, from the lines
/// "ID:CONTROLLERS:PATH" of /proc/self/cgroup.
std::optional<std::pair<std::string, std::string>> cpuHierarchy(const std::string& root, const std::string& selfCgroup,
                                                                bool& unified) {
  // cgroup v2 mounts the whole hierarchy at the root; hybrid systems keep it in a subfolder and v1 its CPU
  // controller in a folder of its own.
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

std::vector<CpuQuota> cgroupQuotas(const std::string& cgroupRoot, const std::string& selfCgroup) {
  std::vector<CpuQuota> out;
  bool unified = false;
  const auto hierarchy = cpuHierarchy(cgroupRoot, selfCgroup, unified);
  if (!hierarchy) return out;
  const auto& [mount, path] = *hierarchy;
  // Outside the cgroup namespace's root ("/../x"), the folders below the mount are not this process's.
  if (path.find("/..") != std::string::npos || path.compare(0, 2, "..") == 0) return out;
  // From the process's own folder up to the mount: a parent's quota binds its children too.
  std::string rel = path;
  while (true) {
    while (rel.size() > 1 && rel.back() == '/') rel.pop_back();
    const bool atRoot = rel == "/" || rel.empty();
    const std::string folder = atRoot ? mount : mount + rel;
    if (isDirectory(folder)) {
      if (const std::optional<int64_t> q = milliQuotaIn(folder, unified)) out.push_back(CpuQuota{folderKey(folder), *q});
    }
    if (atRoot) break;
    const size_t slash = rel.rfind('/');
    rel = slash == 0 || slash == std::string::npos ? "/" : rel.substr(0, slash);
  }
  return out;
}

CpuShare myCpuShare() {
  CpuShare s;
  s.allowed = affinityMask();
  std::vector<CpuQuota> quotas = cgroupQuotas();
  // The tightest first; among equal quotas the outer folder first (it may bind more ranks).
  std::reverse(quotas.begin(), quotas.end());
  std::stable_sort(quotas.begin(), quotas.end(),
                   [](const CpuQuota& a, const CpuQuota& b) { return a.milliCpus < b.milliCpus; });
  for (size_t i = 0; i < quotas.size() && i < s.quotas.size(); ++i) s.quotas[i] = quotas[i];
  return s;
}

CpuFit fitOnMachine(const std::vector<CpuShare>& onMachine, int onlineCpus) {
  CpuFit fit;
  fit.ranks = static_cast<int>(onMachine.size());
  CpuMask all;
  bool known = true;
  for (const CpuShare& s : onMachine) {
    known = known && !s.allowed.empty();
    all |= s.allowed;
  }
  fit.cpus = known ? all.count() : std::max(0, onlineCpus);
  if (!known && onlineCpus <= 0) fit.cpus = fit.ranks;  // nothing known: the ranks count as fitting
  // Uneven confinement that the union hides (three ranks pinned to CPU 0 beside one allowed 0-3): the
  // ranks whose masks lie within one rank's mask outnumber its CPUs.
  for (const CpuShare& s : onMachine) {
    if (s.allowed.empty()) continue;
    int inside = 0;
    for (const CpuShare& o : onMachine) inside += !o.allowed.empty() && o.allowed.within(s.allowed) ? 1 : 0;
    if (inside > s.allowed.count() && inside > fit.crowdedRanks) {
      fit.crowdedRanks = inside;
      fit.crowdedCpus = s.allowed.count();
    }
  }
  // Ranks per quota: a quota is one cgroup's, whichever rank reports it.
  std::map<uint64_t, std::pair<int, int64_t>> perQuota;
  for (const CpuShare& s : onMachine) {
    for (const CpuQuota& q : s.quotas) {
      if (q.key == 0) continue;
      auto& [ranks, milli] = perQuota[q.key];
      ++ranks;
      milli = q.milliCpus;
    }
  }
  for (const auto& entry : perQuota) {
    const auto& [ranks, milli] = entry.second;
    // The most crowded: the largest ranks / quota (cross-multiplied).
    if (fit.quotaMilliCpus == 0 || int64_t{ranks} * fit.quotaMilliCpus > int64_t{fit.ranksInQuota} * milli) {
      fit.ranksInQuota = ranks;
      fit.quotaMilliCpus = milli;
    }
  }
  return fit;
}

namespace {

std::string cpusText(int64_t milli) {
  std::ostringstream s;
  if (milli % 1000 == 0) s << milli / 1000;
  else s << static_cast<double>(milli) / 1000.0;
  s << (milli == 1000 ? " CPU" : " CPUs");
  return s.str();
}

}  // namespace

std::string CpuFit::describe() const {
  std::string s = std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks") + " on " + cpusText(int64_t{cpus} * 1000);
  if (crowdedRanks > 0) {
    s += ", " + std::to_string(crowdedRanks) + " of them confined to " + cpusText(int64_t{crowdedCpus} * 1000);
  }
  if (quotaMilliCpus > 0) {
    s += ", " + std::to_string(ranksInQuota) + " in a cgroup quota of " + cpusText(quotaMilliCpus);
  }
  s += oversubscribed() ? ": oversubscribed, a waiting rank yields" : ": a waiting rank polls before it blocks";
  return s;
}

}  // namespace conflux
