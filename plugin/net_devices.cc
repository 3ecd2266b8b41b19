#include "plugin/net_devices.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <climits>
#include <deque>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "plugin/nccl_net_abi.h"

namespace conflux::plugin {
namespace {

// Messages are reported to NCCL with int sizes (test()), so no transfer may exceed INT_MAX; 1 GiB is also
// what NCCL assumes for plugins that do not say.
constexpr size_t kMaxTransferBytes = size_t{1} << 30;
constexpr int kUnknownSpeedMbps = 10000;

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

std::string realPath(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(path.c_str(), nullptr), &std::free);
  return resolved ? std::string(resolved.get()) : std::string();
}

std::string pciPathOf(const ofi::DomainInfo& d) {
  if (!d.pciBusId.empty()) return realPath("/sys/bus/pci/devices/" + d.pciBusId);
  std::string path = realPath("/sys/class/net/" + d.name + "/device");
  // Only PCI functions have a meaningful PCI path (virtio-net's "device" is a virtio bus node below one).
  return path.find("/pci") != std::string::npos ? path : std::string();
}

uint64_t guidOf(const std::string& name) {
  std::istringstream mac(readLine("/sys/class/net/" + name + "/address"));
  uint64_t value = 0;
  unsigned byte = 0;
  char sep = 0;
  int bytes = 0;
  while (bytes < 6 && (mac >> std::hex >> byte)) {
    value = (value << 8) | (byte & 0xffu);
    ++bytes;
    mac >> sep;
  }
  if (bytes == 6 && value != 0) return value;
  uint64_t hash = 1469598103934665603ull;  // FNV-1a of the name: stable and distinct per device
  for (unsigned char c : name) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

int speedOf(const fi_info* info, const std::string& name) {
  if (info->nic != nullptr && info->nic->link_attr != nullptr && info->nic->link_attr->speed > 0) {
    const uint64_t mbps = uint64_t(info->nic->link_attr->speed) / 1000000u;
    if (mbps > 0 && mbps < uint64_t(INT_MAX)) return int(mbps);
  }
  const std::string text = readLine("/sys/class/net/" + name + "/speed");
  const long mbps = text.empty() ? -1 : std::strtol(text.c_str(), nullptr, 10);
  return mbps > 0 && mbps < INT_MAX ? int(mbps) : kUnknownSpeedMbps;
}

bool isLoopback(const fi_info* info) {
  if (info->domain_attr != nullptr && info->domain_attr->name != nullptr &&
      std::string(info->domain_attr->name) == "lo") {
    return true;
  }
  if (info->src_addr == nullptr) return false;
  if (info->addr_format == FI_SOCKADDR_IN) {
    const auto* a = static_cast<const sockaddr_in*>(info->src_addr);
    return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
  }
  if (info->addr_format == FI_SOCKADDR_IN6) {
    const auto* a = static_cast<const sockaddr_in6*>(info->src_addr);
    return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
  }
  return false;
}

std::vector<std::string> splitNames(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::vector<Device> discover() {
  ofi::applyProviderDefaults();
  ofi::InfoRequest request;
  request.provider = ofi::chooseProvider("");
  request.localAddress = config::getString(config::Var::OFI_ADDR);
  ofi::InfoPtr list = ofi::getInfo(request);
  std::vector<fi_info*> domains = ofi::distinctDomains(list.get());
  const std::vector<std::string> wanted = splitNames(config::getString(config::Var::OFI_DOMAINS));
  if (!wanted.empty()) {
    domains = ofi::selectDomains(domains, wanted, request.provider);
  } else {
    std::vector<fi_info*> remote;
    for (fi_info* i : domains) {
      if (!isLoopback(i)) remote.push_back(i);
    }
    if (!remote.empty()) domains = remote;
  }
  std::vector<Device> out;
  for (fi_info* i : domains) {
    const ofi::DomainInfo d = ofi::describeDomain(i);
    Device dev;
    dev.name = d.name;
    dev.pciPath = pciPathOf(d);
    dev.guid = guidOf(d.name);
    dev.speedMbps = speedOf(i, d.name);
    const size_t maxMsg = i->ep_attr != nullptr && i->ep_attr->max_msg_size ? i->ep_attr->max_msg_size
                                                                             : kMaxTransferBytes;
    dev.maxMessageBytes = maxMsg < kMaxTransferBytes ? maxMsg : kMaxTransferBytes;
    dev.info.reset(fi_dupinfo(i));
    if (!dev.info) throw Error(Code::SystemError, "plugin: fi_dupinfo failed");
    CFX_INFO(kNet, "plugin: device %zu: %s (provider %s, pci '%s', %d Mbps)", out.size(), dev.name.c_str(),
             request.provider.c_str(), dev.pciPath.c_str(), dev.speedMbps);
    out.push_back(std::move(dev));
  }
  return out;
}

}  // namespace

const std::vector<Device>& devices() {
  static std::mutex mutex;
  static std::vector<Device>* list = nullptr;  // kept until exit: NCCL may ask at any time
  std::lock_guard<std::mutex> lock(mutex);
  if (list == nullptr) list = new std::vector<Device>(discover());
  return *list;
}

const Device& device(int dev) {
  const std::vector<Device>& all = devices();
  if (dev < 0 || size_t(dev) >= all.size()) {
    throw Error(Code::InvalidArgument, "plugin: device " + std::to_string(dev) + " does not exist (there are " +
                                           std::to_string(all.size()) + ")");
  }
  return all[size_t(dev)];
}

namespace {

struct VirtualDevice {
  std::vector<int> members;
  Device merged;  ///< what getProperties reports: names joined by '+', speeds added, no fi_info
};

std::mutex virtualMutex;
std::deque<VirtualDevice>& virtualDevices() {
  static auto* list = new std::deque<VirtualDevice>();  // kept until exit (NCCL keeps the name pointers)
  return *list;
}

}  // namespace

int makeVirtualDevice(const int* members, int count) {
  const int physical = int(devices().size());
  if (members == nullptr || count < 1 || count > abi::kMaxVDevs) {
    throw Error(Code::InvalidArgument, "plugin: makeVDevice of " + std::to_string(count) + " devices (1.." +
                                           std::to_string(abi::kMaxVDevs) + ")");
  }
  std::vector<int> list(members, members + count);
  for (int i = 0; i < count; ++i) {
    if (list[size_t(i)] < 0 || list[size_t(i)] >= physical) {
      throw Error(Code::InvalidArgument, "plugin: makeVDevice member " + std::to_string(list[size_t(i)]) +
                                             " is not a physical device (0.." + std::to_string(physical - 1) + ")");
    }
    for (int j = 0; j < i; ++j) {
      if (list[size_t(j)] == list[size_t(i)]) {
        throw Error(Code::InvalidArgument, "plugin: makeVDevice lists device " + std::to_string(list[size_t(i)]) + " twice");
      }
    }
  }
  std::lock_guard<std::mutex> lock(virtualMutex);
  std::deque<VirtualDevice>& all = virtualDevices();
  for (size_t v = 0; v < all.size(); ++v) {
    if (all[v].members == list) return physical + int(v);
  }
  VirtualDevice vd;
  vd.members = list;
  const Device& first = devices()[size_t(list[0])];
  vd.merged.pciPath = first.pciPath;  // NCCL places the virtual NIC where its first member is
  vd.merged.guid = first.guid;
  vd.merged.maxMessageBytes = first.maxMessageBytes;
  for (int m : list) {
    const Device& d = devices()[size_t(m)];
    vd.merged.name += (vd.merged.name.empty() ? "" : "+") + d.name;
    vd.merged.speedMbps += d.speedMbps;
    vd.merged.maxMessageBytes = std::min(vd.merged.maxMessageBytes, d.maxMessageBytes);
  }
  all.push_back(std::move(vd));
  const int index = physical + int(all.size()) - 1;
  CFX_INFO(kNet, "plugin: virtual device %d = %s (%d Mbps)", index, all.back().merged.name.c_str(),
           all.back().merged.speedMbps);
  return index;
}

namespace {

/// The virtual device `dev` (whose entry never moves: the deque only grows), or throws naming the range.
/// `dev` must not be physical.
const VirtualDevice& virtualDevice(int dev, int physical) {
  std::lock_guard<std::mutex> lock(virtualMutex);
  const std::deque<VirtualDevice>& all = virtualDevices();
  if (dev >= physical && size_t(dev - physical) < all.size()) return all[size_t(dev - physical)];
  throw Error(Code::InvalidArgument, "plugin: device " + std::to_string(dev) + " does not exist (" +
                                         std::to_string(physical) + " physical, " + std::to_string(all.size()) +
                                         " virtual)");
}

}  // namespace

int virtualDeviceCount() {
  std::lock_guard<std::mutex> lock(virtualMutex);
  return int(virtualDevices().size());
}

const Device& describedDevice(int dev) {
  const int physical = int(devices().size());
  if (dev >= 0 && dev < physical) return devices()[size_t(dev)];
  return virtualDevice(dev, physical).merged;
}

std::vector<int> membersOf(int dev) {
  const int physical = int(devices().size());
  if (dev >= 0 && dev < physical) return {dev};
  return virtualDevice(dev, physical).members;
}

}  // namespace conflux::plugin
