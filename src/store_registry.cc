#include "src/store_registry.h"

#include <map>
#include <mutex>

#include "core/bootstrap/crypto.h"
#include "core/log.h"

namespace conflux {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::array<uint8_t, 32>, std::shared_ptr<bootstrap::StoreServer>> servers;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: a store may be claimed during static teardown
  return *r;
}

}  // namespace

bootstrap::UniqueId startRendezvous(bool allLocal) {
  // The id must carry an address the peers reach (bootstrap::pickBindHost).
  auto server = bootstrap::StoreServer::startForNewJob(allLocal);
  bootstrap::UniqueId id = server->uniqueId();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.servers[id.secret] = std::move(server);
  CFX_INFO(kBootstrap, "rendezvous store listening on %s", bootstrap::describe(id).c_str());
  return id;
}

std::shared_ptr<bootstrap::StoreServer> claimRendezvous(const bootstrap::UniqueId& id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.servers.find(id.secret);
  if (it == r.servers.end()) return nullptr;
  auto server = std::move(it->second);
  r.servers.erase(it);
  return server;
}

}  // namespace conflux
