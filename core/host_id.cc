// Node identity and local layout; see host_id.h.
#include "core/host_id.h"

#include <unistd.h>

#include <fstream>
#include <unordered_map>

#include "core/config.h"
#include "core/error.h"

namespace conflux {

namespace {
std::string bootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  if (in && std::getline(in, boot)) {
    while (!boot.empty() && (boot.back() == '\n' || boot.back() == ' ')) boot.pop_back();
  }
  return boot;
}
}  // namespace

std::string hostName() {
  std::string forced = config::getString(config::Var::HOSTID);
  if (!forced.empty()) return forced;
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return host[0] ? host : "unknown-host";
}

std::string hostIdentity() {
  std::string forced = config::getString(config::Var::HOSTID);
  if (!forced.empty()) return forced;
  std::string id = hostName();
  const std::string boot = bootId();
  if (!boot.empty()) id += "/" + boot;
  return id;
}

std::string machineIdentity() {
  const std::string boot = bootId();
  return boot.empty() ? hostIdentity() : boot;
}

LocalLayout computeLocalLayout(const std::vector<std::string>& hostIdPerRank, int rank) {
  if (rank < 0 || static_cast<size_t>(rank) >= hostIdPerRank.size()) {
    throw Error(Code::InvalidArgument, "computeLocalLayout: rank " + std::to_string(rank) + " is not in [0, " +
                                           std::to_string(hostIdPerRank.size()) + ")");
  }
  LocalLayout out;
  std::unordered_map<std::string, int> nodeOf;
  const std::string& mine = hostIdPerRank[static_cast<size_t>(rank)];
  for (size_t r = 0; r < hostIdPerRank.size(); ++r) {
    const std::string& h = hostIdPerRank[r];
    nodeOf.emplace(h, static_cast<int>(nodeOf.size()));
    if (h == mine) {
      if (static_cast<int>(r) == rank) out.localRank = static_cast<int>(out.localRanks.size());
      out.localRanks.push_back(static_cast<int>(r));
    }
  }
  out.localSize = static_cast<int>(out.localRanks.size());
  out.nodeIndex = nodeOf.at(mine);
  out.numNodes = static_cast<int>(nodeOf.size());
  return out;
}

}  // namespace conflux
