// The plugin's network devices: one per libfabric domain (NIC) of the chosen provider, discovered once
// per process, with the properties NCCL asks for read from libfabric and sysfs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/ofi/fabric.h"

namespace conflux::plugin {

/// One device as NCCL sees it.
struct Device {
  std::string name;        ///< libfabric domain name (for tcp: the interface, e.g. eth0)
  std::string pciPath;     ///< sysfs path of the NIC's PCI function; empty for virtual interfaces
  uint64_t guid = 0;       ///< MAC address where the interface has one, else a hash of the name
  int speedMbps = 0;       ///< link speed; 10000 when neither libfabric nor sysfs knows it
  size_t maxMessageBytes = 0;  ///< largest message handed to NCCL (properties maxP2pBytes/maxCollBytes)
  ofi::InfoPtr info;       ///< fi_getinfo entry the device's endpoints are opened from
};

/// The devices, discovered on first use (thread-safe). Honours CONFLUX_OFI_PROVIDER, CONFLUX_OFI_ADDR and
/// CONFLUX_OFI_DOMAINS; without CONFLUX_OFI_DOMAINS every domain of the provider except loopback ones,
/// unless loopback is all there is. Throws Error when the provider offers nothing.
const std::vector<Device>& devices();

/// devices()[dev], or throws Error(InvalidArgument) naming the valid range.
const Device& device(int dev);

/// Virtual devices (makeVDevice): a group of up to 4 physical devices, numbered after the physical ones
/// in the order they were made (process-wide). Each connection on a virtual device runs on one member:
/// the connecting side takes them in turn, and the accepting side uses its own member of the same index,
/// so connection c of a virtual device travels over rail c % members on both nodes.
///
/// Makes (or finds: the same list twice gives the same index) the virtual device of `members`. Throws
/// Error(InvalidArgument) for an empty or too long list, a device that does not exist or is virtual, or
/// a device listed twice.
int makeVirtualDevice(const int* members, int count);

/// The physical devices behind `dev`: {dev} for a physical device, the members for a virtual one. Throws
/// Error(InvalidArgument) when `dev` is neither.
std::vector<int> membersOf(int dev);

/// Virtual devices made so far (NCCL's devices() counts them after the physical ones).
int virtualDeviceCount();

/// What getProperties reports for `dev`, physical or virtual (a virtual one has no fi_info). Throws
/// Error(InvalidArgument) when `dev` is neither.
const Device& describedDevice(int dev);

}  // namespace conflux::plugin
