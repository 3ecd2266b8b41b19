// Waiting without burning a core: after a short spin, the caller blocks on the completion queues' wait
// objects (FI_WAIT_FD, armed with fi_trywait, then ppoll) until activity or a deadline.
#pragma once

#include <poll.h>

#include <memory>
#include <vector>

#include "transport/ofi/transport.h"

namespace conflux::ofi {

/// What a thread sleeps on: the armed rails' wait fds (and one more the caller adds).
struct SleepSet {
  pollfd fds[kMaxRails + 1];
  nfds_t count = 0;
  bool allRailsHaveFd = true;  ///< false: some rail cannot block, so sleep only briefly
};

/// Arms every rail's wait object (fi_trywait) and lists its fd in `set`. False when a completion queue
/// may have entries (progress instead of sleeping). Called under the Transport's lock.
bool armRails(const std::vector<std::unique_ptr<Rail>>& rails, SleepSet& set);

/// Sleeps until an fd of `set` is ready or `until` passes (at most 50 ms at a time, so callers re-check
/// their deadline; 200 us when a rail has no wait object). Called without the lock.
void sleepOn(SleepSet& set, Deadline until);

}  // namespace conflux::ofi
