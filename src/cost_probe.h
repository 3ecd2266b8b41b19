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
///   - CONFLUX_COST_PROBE=1 (default): measured once per process, job and shape (rank 0's endpoints,
///     NICs per node, the ranks of each node; a later communicator of that shape reuses it). Rank 0 and
///     the first rank of node 1 ping-pong over @p net: 8-byte round trips give the network's alpha (the
///     median trip's half). Then the ranks of every local index that all nodes have (all ranks, on nodes
///     of equal size) run lock-step rounds of 1 MiB at once, to the rank of their local index on the
///     next node and from the previous node's (a ring between nodes with every local rank crossing, as
///     the hierarchical all-reduces run); the slowest node's slowest round (each rank's best window of
///     6), solved for the bandwidth with the model's step and share (nicBandwidthUnderLoad), is the
///     per-NIC bandwidth. Rank 0 times a memory copy and a reduction for the intra-node bandwidth and
///     gamma. About 150 ms with 1 Gbit/s per rank, a few ms on a fast network.
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
