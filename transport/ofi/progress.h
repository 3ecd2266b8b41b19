// Waiting without burning a core: after a short spin, the caller blocks on the completion queues' wait
// objects (FI_WAIT_FD, armed with fi_trywait, then ppoll) until activity or a deadline.
#pragma once

#include <memory>
#include <vector>

#include "transport/ofi/transport.h"

namespace conflux::ofi {

/// Blocks until a rail's completion queue may have entries, or `until` passes (at most ~50 ms at a time,
/// so callers re-check their deadline). Returns at once when fi_trywait reports pending work. Rails
/// without a wait object make it sleep briefly instead.
void blockOnRails(const std::vector<std::unique_ptr<Rail>>& rails, Deadline until);

}  // namespace conflux::ofi
