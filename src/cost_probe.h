// Calibration of the cost model for a communicator spanning nodes (algorithms/cost_model.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/cost_model.h"
#include "algorithms/plan.h"

#include "transport/network.h"

namespace conflux {

/// The cost model's parameters, the same on every rank (collective: every rank calls it in the same
/// order). In order of precedence:
///   - CONFLUX_COST_FILE: read by rank 0 (key=value lines, see loadCostFile);
///   - CONFLUX_COST_PROBE=1 (default): measured once per process and pair of nodes. Rank 0 and the first
///     rank of node 1 ping-pong over @p net: 8-byte round trips give the network's alpha (the median
///     trip's half). Then every rank at once runs lock-step rounds of 1 MiB to the rank of its local
///     index on the next node and from the previous node's (a ring between nodes with every local rank
///     crossing, as the hierarchical all-reduces run); a round less alpha is a rank's transfer time, and
///     the slowest rank's rate, made a per-NIC figure by the model's share (nicBandwidthUnderLoad), is the
///     bandwidth. Rank 0 times a memory copy and a reduction for the intra-node bandwidth and gamma.
///     About 150 ms with 1 Gbit/s per rank, a few ms on a fast network.
///   - otherwise the defaults of CostParams.
/// NICs per node is the most distinct endpoint identities (Network::endpointKey: bound address and
/// domains) among the ranks of one node. Rank 0's numbers are given to every rank, so all select alike.
/// @p chunkBytes and @p chooseChunk (CONFLUX_CHUNK_BYTES, as the communicator read it) go into the result;
/// so does rank 0's @p windowRounds (CONFLUX_EXEC_WINDOW), which the hierarchical formulas follow, so that
/// every rank's selector chooses alike even if the setting differs between ranks.
/// @p timeoutMs bounds each wait of the probe's messages.
CostParams calibrateCostModel(int rank, const NodeLayout& layout, transport::Network& net, uint64_t chunkBytes,
                              bool chooseChunk, int windowRounds, int timeoutMs, const transport::BlobAllGather& allGather);

}  // namespace conflux
