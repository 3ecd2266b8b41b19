#include "src/recovery_point.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "core/bootstrap/store_server.h"
#include "core/error.h"
#include "core/log.h"

namespace conflux {

RecoveryPoint RecoveryPoint::open(const bootstrap::UniqueId& commId) {
  RecoveryPoint p;
  // The label keeps this digest apart from every other use of the secret (jobTag, the store's handshake).
  p.base_ = bootstrap::Sha256().update("conflux recovery point v1").update(commId.secret.data(), commId.secret.size()).finish();
  try {
    const std::string host = bootstrap::pickBindHost(bootstrap::isLoopback(commId.addr));
    // A backlog for every survivor of a large job: they connect before the leader serves.
    bootstrap::Fd fd = bootstrap::listenOn(bootstrap::resolveAddress(host, 0), 4096);
    socklen_t len = sizeof p.address_;
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&p.address_), &len) != 0) {
      throwSystemError("recovery point: getsockname");
    }
    p.listener_ = std::make_shared<bootstrap::Fd>(std::move(fd));
  } catch (const Error& e) {
    CFX_WARN(kInit, "no recovery point (cfxCommShrink cannot be led by this rank): %s", e.what());
    p.address_ = sockaddr_storage{};
  }
  return p;
}

bootstrap::Digest RecoveryPoint::secretFor(const std::vector<int>& excluded, uint32_t generation) const {
  bootstrap::Sha256 h;
  h.update("shrink").update(base_.data(), base_.size());
  auto word = [&](uint32_t v) {
    const uint8_t le[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
    h.update(le, sizeof le);
  };
  word(generation);
  word(static_cast<uint32_t>(excluded.size()));
  for (int r : excluded) word(static_cast<uint32_t>(r));
  return h.finish();
}

bootstrap::UniqueId RecoveryPoint::shrinkId(const sockaddr_storage& leaderAddress, const std::vector<int>& excluded,
                                            uint32_t generation) const {
  bootstrap::UniqueId id;
  id.addr = leaderAddress;
  id.addrLen = bootstrap::addressLength(leaderAddress);
  id.secret = secretFor(excluded, generation);
  return id;
}

std::shared_ptr<bootstrap::StoreServer> RecoveryPoint::serveShrink(const std::vector<int>& excluded,
                                                                   uint32_t generation) const {
  if (listener_ == nullptr) throw Error(Code::SystemError, "this rank has no recovery point (it could not bind one at init)");
  // A duplicate: the server closes its descriptor when it stops, and the socket stays for a later shrink.
  bootstrap::Fd dup(::fcntl(listener_->get(), F_DUPFD_CLOEXEC, 0));
  if (!dup.valid()) throwSystemError("recovery point: dup");
  return bootstrap::StoreServer::serveOn(std::move(dup), secretFor(excluded, generation));
}

}  // namespace conflux
