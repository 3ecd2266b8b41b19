// Small helpers shared by the hwloc and sysfs discovery (internal to core/topology).
#pragma once

#include <string>

#include "core/topology/topology.h"

namespace conflux::topo::detail {

/// First line of a file without the newline; empty when unreadable.
std::string readLine(const std::string& path);

/// Link speed in Gbit/s of an RDMA device (first port's rate) or, failing that, of a netdev; 0 when
/// unknown. Either name may be empty.
double nicSpeedGbps(const std::string& rdmaDevice, const std::string& netdev);

/// True for a display-class PCI function made by a GPU vendor (NVIDIA, AMD).
bool looksLikeGpu(uint16_t vendorId, uint32_t classId);

/// Discovery with hwloc (discover_hwloc.cc; only built with CONFLUX_HAVE_HWLOC).
Machine discoverHwloc();

/// Sorts gpus and nics by bus id, marks their PCI nodes Gpu/Nic and fills defaults (cores, distances).
void finishMachine(Machine& m);

}  // namespace conflux::topo::detail
