// Launcher detection: rank, size and local rank from the environment; see launcher_env.h.
#include "core/bootstrap/launcher_env.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/config.h"
#include "core/error.h"

namespace conflux::bootstrap {
namespace {

// Reads variables through the injected lookup and parses them with errors naming the variable.
class Env {
 public:
  Env(const EnvLookup& lookup, const char* source) : lookup_(lookup), source_(source) {}

  const char* raw(const char* name) const {
    const char* v = lookup_(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  }
  bool has(const char* name) const { return raw(name) != nullptr; }

  // Non-negative int, or -1 when unset.
  int integer(const char* name) const {
    const char* v = raw(name);
    if (v == nullptr) return -1;
    std::string s(v);
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
      throw Error(Code::InvalidArgument, "launcher environment (" + std::string(source_) + "): " + name + "='" +
                                             s + "' is not a non-negative integer");
    }
    return std::atoi(v);
  }

  [[noreturn]] void invalid(const std::string& what) const {
    throw Error(Code::InvalidArgument, "launcher environment (" + std::string(source_) + "): " + what);
  }

 private:
  const EnvLookup& lookup_;
  const char* source_;
};

// Expands Slurm's "2(x3),1" into {2, 2, 2, 1}; empty when malformed.
std::vector<int> expandTasksPerNode(const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    std::string item = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    int count = 0, repeat = 1;
    char tail = 0;
    int n = std::sscanf(item.c_str(), "%d(x%d)%c", &count, &repeat, &tail);
    if (n < 1 || n == 3 || count < 0 || repeat < 1 || repeat > 100000) return {};
    if (n == 1 && item.find_first_not_of("0123456789") != std::string::npos) return {};
    out.insert(out.end(), static_cast<size_t>(repeat), count);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return out;
}

struct Source {
  const char* name;
  const char* rankVar;
  std::vector<const char*> sizeVars;   // first one set wins
  const char* localRankVar;
  const char* localSizeVar;
};

const std::vector<Source>& sources() {
  static const std::vector<Source> list = {
      {"CONFLUX", "CONFLUX_RANK", {"CONFLUX_NRANKS"}, "CONFLUX_LOCAL_RANK", "CONFLUX_LOCAL_SIZE"},
      {"Open MPI", "OMPI_COMM_WORLD_RANK", {"OMPI_COMM_WORLD_SIZE"}, "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"PMIx", "PMIX_RANK", {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE"}, "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"PMI", "PMI_RANK", {"PMI_SIZE"}, "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
      {"Slurm", "SLURM_PROCID", {"SLURM_NTASKS", "SLURM_NPROCS"}, "SLURM_LOCALID", nullptr},
      {"torchrun", "RANK", {"WORLD_SIZE"}, "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
  };
  return list;
}

// Slurm does not export the local size directly: take this node's entry of the tasks-per-node list.
int slurmLocalSize(const Env& e) {
  const char* var = e.has("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  const char* text = e.raw(var);
  int node = e.integer("SLURM_NODEID");
  if (text == nullptr || node < 0) return -1;
  std::vector<int> perNode = expandTasksPerNode(text);
  if (perNode.empty()) e.invalid(std::string(var) + "='" + text + "' is malformed");
  if (static_cast<size_t>(node) >= perNode.size()) {
    e.invalid("SLURM_NODEID=" + std::to_string(node) + " is beyond " + var + "='" + text + "'");
  }
  return perNode[static_cast<size_t>(node)];
}

std::string jobIdentifiers(const EnvLookup& lookup) {
  static const char* const kVars[] = {"CONFLUX_JOB_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
                                      "SLURM_JOB_ID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID"};
  std::string out;
  for (const char* name : kVars) {
    const char* v = lookup(name);
    if (v == nullptr || *v == '\0') continue;
    if (std::string(name) == "TORCHELASTIC_RUN_ID" && std::string(v) == "none") continue;  // torchrun default
    out += std::string(name) + "=" + v + ";";
  }
  return out;
}

}  // namespace

EnvLookup defaultEnvLookup() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

namespace {

// Rank, size and (where the source has them) local rank and size from one source; nullopt when it does
// not define both rank and size. Throws for values that do not parse or are out of range.
std::optional<LauncherInfo> readSource(const Source& s, const EnvLookup& lookup) {
  Env e(lookup, s.name);
  const char* sizeVar = nullptr;
  for (const char* v : s.sizeVars) {
    if (e.has(v)) {
      sizeVar = v;
      break;
    }
  }
  if (!e.has(s.rankVar) || sizeVar == nullptr) return std::nullopt;
  LauncherInfo info;
  info.source = s.name;
  info.rank = e.integer(s.rankVar);
  info.size = e.integer(sizeVar);
  if (info.size < 1) e.invalid(std::string(sizeVar) + "=" + std::to_string(info.size) + " must be at least 1");
  if (info.rank >= info.size) {
    e.invalid(std::string(s.rankVar) + "=" + std::to_string(info.rank) + " is out of range [0, " +
              std::to_string(info.size) + ") set by " + sizeVar);
  }
  info.localRank = e.integer(s.localRankVar);
  info.localSize = s.localSizeVar ? e.integer(s.localSizeVar) : slurmLocalSize(e);
  if (info.localSize == 0 || info.localSize > info.size) {
    e.invalid("local size " + std::to_string(info.localSize) + " is not in [1, " + std::to_string(info.size) + "]");
  }
  if (info.localRank >= 0 && info.localSize > 0 && info.localRank >= info.localSize) {
    e.invalid(std::string(s.localRankVar) + "=" + std::to_string(info.localRank) + " is out of range [0, " +
              std::to_string(info.localSize) + ")");
  }
  return info;
}

}  // namespace

std::optional<LauncherInfo> detectLauncher(const EnvLookup& lookup) {
  const std::vector<Source>& list = sources();
  for (size_t i = 0; i < list.size(); ++i) {
    std::optional<LauncherInfo> info = readSource(list[i], lookup);
    if (!info) continue;
    // Launchers stack (srun --mpi=pmi2 sets PMI's variables and Slurm's): what the first source leaves
    // unsaid about this node comes from a later one that agrees on rank and size. One that disagrees
    // describes another launch (an allocation's shell, say) and is not used; nor is one that does not parse.
    for (size_t j = i + 1; j < list.size() && (info->localRank < 0 || info->localSize < 0); ++j) {
      std::optional<LauncherInfo> other;
      try {
        other = readSource(list[j], lookup);
      } catch (const Error&) {
        continue;
      }
      if (!other || other->rank != info->rank || other->size != info->size) continue;
      if (other->localRank < 0 && other->localSize < 0) continue;
      if (info->localRank < 0) info->localRank = other->localRank;
      if (info->localSize < 0) info->localSize = other->localSize;
      if (info->localRank >= 0 && info->localSize > 0 && info->localRank >= info->localSize) {
        throw Error(Code::InvalidArgument, "launcher environment (" + info->source + ", local ranks from " +
                                               other->source + "): local rank " + std::to_string(info->localRank) +
                                               " is out of range [0, " + std::to_string(info->localSize) + ")");
      }
      info->localFrom = other->source;
    }
    info->jobId = jobIdentifiers(lookup);
    return info;
  }
  return std::nullopt;
}

}  // namespace conflux::bootstrap
