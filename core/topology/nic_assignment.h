// Multi-rail NIC assignment: which NICs each local rank drives, and which local ranks share a rail.
// Pure functions over the model, so that they are tested on fixtures of real machines.
#pragma once

#include <string>
#include <vector>

#include "core/topology/topology.h"

namespace conflux::topo {

/// Where a local rank runs.
struct RankLocality {
  int gpu = -1;            ///< index in Machine::gpus; -1 for a rank without a GPU
  std::vector<int> cpus;   ///< CPUs the rank may run on (a GPU-less rank's locality); empty = anywhere
};

/// The result of assignNics. A rail is one NIC index: rail r of every node of the same shape is the same
/// NIC position, so traffic of local rank i on rail r meets local rank i of the peer node on its rail r.
struct NicAssignment {
  std::vector<int> railNics;                ///< rail r is machine.nics[railNics[r]]
  std::vector<std::vector<int>> rankRails;  ///< per local rank: the rails it drives, ascending

  bool operator==(const NicAssignment&) const = default;
};

/// The NICs that carry inter-node traffic, in rail order (ascending bus id): the NICs with a matched
/// libfabric domain when any has one, else the RDMA NICs when there are any, else every NIC.
std::vector<int> railNics(const Machine& m);

/// Gives each local rank its nearest rails, spreading ranks that share the same nearest NICs fairly
/// (rule in nic_assignment.cc). No NICs gives every rank an empty list. Throws Error(InvalidArgument)
/// naming the rank when its GPU index is not in m.gpus.
NicAssignment assignNics(const Machine& m, const std::vector<RankLocality>& ranks);

/// The libfabric domains local rank @p localRank opens, one rail each, in rail order: the fabricDomain of
/// each of its rails' NICs (NICs without one are skipped). Empty when none has a matched domain, or when
/// @p localRank is out of range.
std::vector<std::string> rankFabricDomains(const Machine& m, const NicAssignment& a, int localRank);

/// For each rail, the local ranks that drive it, ascending.
std::vector<std::vector<int>> ranksPerRail(const NicAssignment& a);

/// Localities of the usual launch of @p localSize ranks: rank i on GPU i (mod the GPU count) when there
/// are GPUs, else on the CPUs of a NUMA node, ranks split into contiguous blocks over the NUMA nodes.
std::vector<RankLocality> defaultLocalities(const Machine& m, int localSize);

}  // namespace conflux::topo
