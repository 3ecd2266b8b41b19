// Argument checks of the API boundary: each failure names the argument and says what was wrong.
#pragma once

#include "core/error.h"
#include "src/communicator.h"

namespace conflux {

/// Checks one collective call's arguments for this rank (datatype, op, root, counts, buffers, overlap).
Status validateCollective(const CallArgs& a, int rank, int nranks);

/// Checks a send or receive (peer in range, buffer, datatype, count).
Status validateP2p(const void* buf, uint64_t count, int dtype, int peer, int nranks, const char* bufName);

/// Checks datatype and op enum values as the caller passed them (before conversion).
Status validateEnums(int dtype, int op, bool needsOp);

}  // namespace conflux
