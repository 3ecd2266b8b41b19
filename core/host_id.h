// Node identity and the local layout derived from it: which ranks share this node. Ranks with the same
// identity are on one node (shared memory, CUDA IPC); tests give each process its own identity through
// CONFLUX_HOSTID to simulate several nodes on one machine.
#pragma once

#include <string>
#include <vector>

namespace conflux {

/// CONFLUX_HOSTID when set, else "<hostname>/<boot id>" (the boot id tells apart containers or VMs that
/// share a hostname; "<hostname>" alone when /proc/sys/kernel/random/boot_id is unreadable).
std::string hostIdentity();

/// The name people know this node by, for reports (flight recorder, metrics): CONFLUX_HOSTID when set,
/// else the hostname ("unknown-host" when it has none).
std::string hostName();

/// The kernel this process runs on: /proc/sys/kernel/random/boot_id, whatever CONFLUX_HOSTID says, so that
/// simulated nodes (namespaces, containers) on one machine are known to share its CPUs. Falls back to
/// hostIdentity() when the boot id cannot be read.
std::string machineIdentity();

/// Where a rank sits among the ranks of its node and among the nodes.
struct LocalLayout {
  int localRank = 0;            ///< index of this rank in localRanks
  int localSize = 1;            ///< ranks on this node
  std::vector<int> localRanks;  ///< global ranks on this node, ascending
  int nodeIndex = 0;            ///< this node's index, nodes numbered by first appearance in rank order
  int numNodes = 1;             ///< distinct nodes
};

/// Layout of @p rank given every rank's host identity (index = rank). Throws Error(InvalidArgument)
/// when @p rank is out of range.
LocalLayout computeLocalLayout(const std::vector<std::string>& hostIdPerRank, int rank);

}  // namespace conflux
