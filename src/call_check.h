// Cross-rank argument checks: what differs between two ranks' views of the same call.
#pragma once

#include <cstdint>
#include <string>

#include "core/types.h"

#include "transport/local_group.h"

namespace conflux {

/// The descriptor of one call (seq: the communicator's 1-based call number).
transport::CallDescriptor describeCall(uint64_t seq, Collective coll, DataType dtype, RedOp op, int root, uint64_t count);

/// The first argument on which `peer` disagrees with `mine` for the same call, e.g. "count 8 vs 16" or
/// "root 0 vs 1", or "" when they agree. Only arguments the collective uses are compared (the op only
/// for reductions, the root only for rooted collectives, nothing but the kind for point-to-point).
std::string callMismatch(const transport::CallDescriptor& mine, const transport::CallDescriptor& peer);

}  // namespace conflux
