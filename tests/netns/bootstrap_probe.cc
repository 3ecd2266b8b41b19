// bootstrap_probe: the smallest multi-node program. It finds the rendezvous store from the launcher
// environment (CONFLUX_RANK/NRANKS/BOOTSTRAP_ADDR/SECRET, as tests/netns/netns_cluster.py sets them),
// all-gathers every rank's host identity (CONFLUX_HOSTID) over the store and prints them:
//
//   bootstrap_probe: rank 1/2 on node1 via CONFLUX_BOOTSTRAP_ADDR: hosts node0,node1
//
// It needs only the bootstrap (TCP between namespaces), not an inter-node data transport, so it checks
// that simulated nodes can reach each other's store. Exit code 0 on success, 1 with a message on error.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/bootstrap/bootstrap.h"
#include "core/bootstrap/launcher_env.h"
#include "core/bootstrap/store_client.h"
#include "core/config.h"
#include "core/host_id.h"

namespace {

constexpr size_t kHostBytes = 256;

int probe() {
  using conflux::bootstrap::Bootstrap;
  using conflux::bootstrap::StoreClient;
  const auto timeout = std::chrono::milliseconds(conflux::config::getInt(conflux::config::Var::TIMEOUT_MS));
  conflux::bootstrap::EnvBootstrap env =
      conflux::bootstrap::resolveFromEnvironment(conflux::bootstrap::defaultEnvLookup(), timeout);

  Bootstrap boot(std::make_unique<StoreClient>(env.id, timeout), env.rank, env.nranks, "netns-probe");
  const std::string mine = conflux::hostIdentity();
  std::vector<uint8_t> blob(kHostBytes, 0);
  std::memcpy(blob.data(), mine.data(), std::min(mine.size(), kHostBytes - 1));
  std::vector<uint8_t> all = boot.allGather(blob);

  std::string hosts;
  for (int r = 0; r < env.nranks; ++r) {
    const char* h = reinterpret_cast<const char*>(all.data() + static_cast<size_t>(r) * kHostBytes);
    if (r > 0) hosts += ',';
    hosts.append(h, strnlen(h, kHostBytes));
  }
  std::printf("bootstrap_probe: rank %d/%d on %s via %s: hosts %s\n", env.rank, env.nranks, mine.c_str(),
              env.rendezvous.c_str(), hosts.c_str());
  std::fflush(stdout);
  boot.barrier();
  boot.finish(env.server != nullptr);  // the store's host waits until every rank has left
  return 0;
}

}  // namespace

int main() {
  try {
    return probe();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bootstrap_probe: %s\n", e.what());
    return 1;
  }
}
