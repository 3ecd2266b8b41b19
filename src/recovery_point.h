// A communicator's recovery point: where its surviving ranks meet again after a failure (cfxCommShrink)
// without the failed ranks and without the communicator's own links, which a failure leaves in a state
// no rank can vouch for (half-read channels, receives still posted, a shared error slot set).
//
// At init every rank binds a listening TCP socket that nothing serves yet: the kernel completes
// connections into its backlog, so it costs one descriptor and no thread. The ranks publish its address
// in the init exchange. A shrink's survivors all know who the lowest surviving rank is: that rank serves
// a rendezvous store on (a duplicate of) its socket, the others connect to it, and the new communicator
// is made through that store as any communicator is. The socket stays open for a later shrink.
//
// The store's secret is derived from the communicator's own secret, the excluded ranks and how many
// shrinks with that list came before: survivors that disagree on who is excluded fail the store's
// handshake instead of forming two communicators, and each shrink's communicator has an id of its own.
// It keeps out whoever does not hold the communicator's secret; an excluded rank holds it.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/bootstrap/crypto.h"
#include "core/bootstrap/socket.h"
#include "core/bootstrap/unique_id.h"

namespace conflux {

namespace bootstrap {
class StoreServer;
}

class RecoveryPoint {
 public:
  RecoveryPoint() = default;

  /// Binds this rank's socket for the communicator whose rendezvous store is @p commId: where a new
  /// job's store would bind (bootstrap::pickBindHost), on loopback when that store is on loopback (all
  /// ranks are on this machine then). When no socket can be bound, logs a warning and returns a point
  /// without an address: a shrink led by this rank then fails, naming it.
  static RecoveryPoint open(const bootstrap::UniqueId& commId);

  /// The bound address, or an address of family AF_UNSPEC (0) when there is none.
  const sockaddr_storage& address() const { return address_; }

  /// The id of the `generation`-th communicator that leaves out @p excluded (ascending), whose store is
  /// served at @p leaderAddress (the leader's address()).
  bootstrap::UniqueId shrinkId(const sockaddr_storage& leaderAddress, const std::vector<int>& excluded,
                               uint32_t generation) const;

  /// Serves that store on this rank's socket (this rank leads the shrink). Throws Error(SystemError).
  std::shared_ptr<bootstrap::StoreServer> serveShrink(const std::vector<int>& excluded, uint32_t generation) const;

 private:
  bootstrap::Digest secretFor(const std::vector<int>& excluded, uint32_t generation) const;

  std::shared_ptr<bootstrap::Fd> listener_;  // shared: a communicator is not copied, but its parts may be
  sockaddr_storage address_{};
  bootstrap::Digest base_{};  // derived from the communicator's secret; never the secret itself
};

}  // namespace conflux
