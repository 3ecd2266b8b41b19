#include "transport/ofi/fabric.h"

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

namespace conflux::ofi {

uint32_t requestedApiVersion() {
  const uint32_t wanted = FI_VERSION(1, 17);
  const uint32_t runtime = fi_version();
  return runtime < wanted ? runtime : wanted;
}

std::string fiErrorMessage(const char* what, int rc) {
  return std::string(what) + ": " + fi_strerror(rc < 0 ? -rc : rc) + " (" + std::to_string(rc) + ")";
}

void checkFi(int rc, const char* what) {
  if (rc != 0) throw Error(Code::SystemError, "ofi: " + fiErrorMessage(what, rc));
}

std::vector<std::string> setProviderDefaultsIfUnset() {
  std::vector<std::string> applied;
  if (!config::getBool(config::Var::OFI_PROVIDER_DEFAULTS)) return applied;
  // Measured on tcp;ofi_rxm (docs/ofi.md): rxm's 16 KiB eager limit splits 16-128 KiB messages through
  // bounce buffers; 64 KiB doubles 64 KiB throughput and makes blocking waits free at that size.
  static const struct { const char* name; const char* value; } kDefaults[] = {
      {"FI_OFI_RXM_EAGER_LIMIT", "65536"},
  };
  for (const auto& d : kDefaults) {
    if (std::getenv(d.name) != nullptr) continue;
    if (::setenv(d.name, d.value, 0) == 0) {
      CFX_INFO(kNet, "ofi: applied provider default %s=%s (set it yourself to override)", d.name, d.value);
      applied.push_back(d.name);
    }
  }
  return applied;
}

std::vector<std::string> applyProviderDefaults() {
  static std::once_flag once;
  static std::vector<std::string> applied;
  std::call_once(once, [] { applied = setProviderDefaultsIfUnset(); });
  return applied;
}

namespace {

InfoPtr tryGetInfo(const InfoRequest& request, const std::string& provider, uint64_t caps, uint64_t txOpFlags = 0) {
  InfoPtr hints(fi_allocinfo());
  if (!hints) throw Error(Code::SystemError, "ofi: fi_allocinfo failed");
  hints->caps = caps;
  hints->ep_attr->type = FI_EP_RDM;
  // We pass a struct fi_context2 as every operation's context, so both context modes are fine.
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  // Every MR mode bit we honour (memory.cc); the provider keeps those it needs.
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED |
                                FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->domain_attr->control_progress = FI_PROGRESS_UNSPEC;
  hints->domain_attr->data_progress = FI_PROGRESS_UNSPEC;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  hints->tx_attr->op_flags = txOpFlags;
  if (!provider.empty()) hints->fabric_attr->prov_name = ::strdup(provider.c_str());

  // Only IP-based providers take an address as node; shm would use it as its endpoint's name.
  const bool ipProvider = provider.find("tcp") != std::string::npos || provider.find("sockets") != std::string::npos ||
                          provider.find("udp") != std::string::npos || provider.find("verbs") != std::string::npos;
  const bool bindAddress = !request.localAddress.empty() && ipProvider;
  fi_info* out = nullptr;
  int rc = fi_getinfo(requestedApiVersion(), bindAddress ? request.localAddress.c_str() : nullptr, nullptr,
                      bindAddress ? FI_SOURCE : 0, hints.get(), &out);
  if (rc != 0) {
    CFX_TRACE(kNet, "ofi: fi_getinfo(%s, caps 0x%llx) -> %s", provider.c_str(), (unsigned long long)caps,
              fi_strerror(-rc));
    return nullptr;
  }
  return InfoPtr(out);
}

}  // namespace

std::string chooseProvider(const std::string& optionProvider) {
  if (!optionProvider.empty()) return optionProvider;
  std::string fromConfig = config::getString(config::Var::OFI_PROVIDER);
  if (!fromConfig.empty()) return fromConfig;
  if (tryGetInfo({}, "efa", FI_TAGGED)) return "efa";
  if (const char* fp = std::getenv("FI_PROVIDER"); fp != nullptr && *fp != '\0') return fp;
  return "tcp;ofi_rxm";
}

InfoPtr getInfo(const InfoRequest& request) {
  // Wanted capabilities first, then without RMA, then without directed receive (the tag names the source).
  const uint64_t base = FI_TAGGED | FI_SEND | FI_RECV;
  const uint64_t attempts[] = {
      base | FI_DIRECTED_RECV | FI_RMA | FI_WRITE | FI_REMOTE_WRITE,
      base | FI_DIRECTED_RECV,
      base | FI_RMA | FI_WRITE | FI_REMOTE_WRITE,
      base,
  };
  for (uint64_t caps : attempts) {
    if (InfoPtr info = tryGetInfo(request, request.provider, caps)) return info;
  }
  if (!request.localAddress.empty()) {
    // Providers that do not take an IP node (shm, ...): ask again without the bind address.
    InfoRequest unbound = request;
    unbound.localAddress.clear();
    for (uint64_t caps : attempts) {
      if (InfoPtr info = tryGetInfo(unbound, request.provider, caps)) {
        CFX_INFO(kNet, "ofi: provider %s ignores the bind address %s", request.provider.c_str(),
                 request.localAddress.c_str());
        return info;
      }
    }
  }
  throw Error(Code::SystemError, "ofi: provider '" + request.provider +
                                     "' offers no FI_EP_RDM endpoint with FI_TAGGED" +
                                     (request.localAddress.empty() ? "" : " on " + request.localAddress) +
                                     " (fi_info -p '" + request.provider + "' lists what it has)");
}

bool offersDeliveryComplete(const InfoRequest& request, uint64_t caps) {
  const uint64_t asked =
      caps & (FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_RMA | FI_WRITE | FI_REMOTE_WRITE);
  if (tryGetInfo(request, request.provider, asked, FI_DELIVERY_COMPLETE)) return true;
  // getInfo may have succeeded only without the bind address (providers that take no IP node).
  if (request.localAddress.empty()) return false;
  InfoRequest unbound = request;
  unbound.localAddress.clear();
  return tryGetInfo(unbound, request.provider, asked, FI_DELIVERY_COMPLETE) != nullptr;
}

std::vector<fi_info*> distinctDomains(fi_info* list) {
  std::vector<fi_info*> out;
  std::set<std::string> seen;
  for (fi_info* i = list; i != nullptr; i = i->next) {
    std::string name = i->domain_attr && i->domain_attr->name ? i->domain_attr->name : "";
    if (seen.insert(name).second) out.push_back(i);
  }
  return out;
}

DomainInfo describeDomain(const fi_info* info) {
  DomainInfo d;
  if (info->domain_attr && info->domain_attr->name) d.name = info->domain_attr->name;
  const fid_nic* nic = info->nic;
  if (nic != nullptr && nic->bus_attr != nullptr && nic->bus_attr->bus_type == FI_BUS_PCI) {
    const fi_pci_attr& pci = nic->bus_attr->attr.pci;
    char id[32];
    std::snprintf(id, sizeof id, "%04x:%02x:%02x.%x", unsigned(pci.domain_id), unsigned(pci.bus_id),
                  unsigned(pci.device_id), unsigned(pci.function_id));
    d.pciBusId = id;
  }
  return d;
}

std::vector<DomainInfo> providerDomains(const std::string& optionProvider) {
  applyProviderDefaults();
  InfoRequest request;
  request.provider = chooseProvider(optionProvider);
  InfoPtr list = getInfo(request);
  std::vector<DomainInfo> out;
  for (fi_info* i : distinctDomains(list.get())) out.push_back(describeDomain(i));
  return out;
}

std::vector<fi_info*> selectDomains(const std::vector<fi_info*>& domains, const std::vector<std::string>& names,
                                    const std::string& provider) {
  std::vector<fi_info*> out;
  for (const std::string& name : names) {
    fi_info* found = nullptr;
    for (fi_info* i : domains) {
      if (describeDomain(i).name == name) {
        found = i;
        break;
      }
    }
    if (found == nullptr) {
      std::string offered;
      for (fi_info* i : domains) offered += (offered.empty() ? "" : ", ") + describeDomain(i).name;
      throw Error(Code::InvalidArgument, "ofi: domain '" + name + "' (CONFLUX_OFI_DOMAINS or the topology) is not "
                                         "offered by provider '" + provider + "'; it offers: " + offered);
    }
    out.push_back(found);
  }
  return out;
}

}  // namespace conflux::ofi
