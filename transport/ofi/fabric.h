// libfabric setup: provider choice, provider tuning defaults, fi_getinfo with the capabilities we want
// (falling back step by step), and RAII wrappers that fi_close every handle.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <memory>
#include <string>
#include <vector>

namespace conflux::ofi {

/// API version requested from fi_getinfo: 1.17 is what Debian 12 ships, and libfabric 2.x accepts
/// 1.x requests. Lowered to the runtime's version when the library is older.
uint32_t requestedApiVersion();

template <class T>
struct FidCloser {
  void operator()(T* handle) const {
    if (handle != nullptr) fi_close(&handle->fid);
  }
};
/// Owning pointer to a libfabric object (fid_fabric, fid_domain, fid_ep, fid_av, fid_cq, fid_mr).
template <class T>
using Fid = std::unique_ptr<T, FidCloser<T>>;

struct InfoDeleter {
  void operator()(fi_info* info) const { fi_freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

/// "what: fi_strerror(-rc) (rc)" for a failed libfabric call.
std::string fiErrorMessage(const char* what, int rc);
/// Throws Error(SystemError) with fiErrorMessage when rc != 0.
void checkFi(int rc, const char* what);

/// Sets provider defaults that measurably help (e.g. FI_OFI_RXM_EAGER_LIMIT=65536) unless the user set
/// them; must run before the first fi_getinfo of the process. Logs each one applied at INFO.
/// Returns the names of the variables it set.
std::vector<std::string> applyProviderDefaults();
/// The work of applyProviderDefaults without its once-per-process guard (for tests).
std::vector<std::string> setProviderDefaultsIfUnset();

/// The provider to ask for: explicit (option, CONFLUX_OFI_PROVIDER) first, then efa when present,
/// then FI_PROVIDER, then "tcp;ofi_rxm".
std::string chooseProvider(const std::string& optionProvider);

struct InfoRequest {
  std::string provider;
  std::string localAddress;   ///< bind address for tcp-like providers (ignored for efa)
};

/// fi_getinfo for FI_EP_RDM + FI_TAGGED (+ FI_DIRECTED_RECV, + FI_RMA where offered). Returns the
/// provider's list (one entry per domain/NIC). Throws Error naming the provider when nothing matches.
InfoPtr getInfo(const InfoRequest& request);

/// Whether the provider accepts FI_DELIVERY_COMPLETE as a transmit flag with these capabilities: asks
/// fi_getinfo again with tx_attr->op_flags = FI_DELIVERY_COMPLETE (providers reject op flags they lack).
/// The endpoint itself is opened without it, so only the operations that pass it pay for it.
bool offersDeliveryComplete(const InfoRequest& request, uint64_t caps);

/// Distinct domains in an fi_getinfo list, first entry of each, in list order.
std::vector<fi_info*> distinctDomains(fi_info* list);

/// A domain as the provider lists it: its name and the PCI bus id "dddd:bb:dd.f" of its NIC (empty when
/// the provider gives no PCI attributes, as tcp does for virtual interfaces).
struct DomainInfo {
  std::string name;
  std::string pciBusId;
};
DomainInfo describeDomain(const fi_info* info);

/// Every domain the provider chooseProvider(@p optionProvider) offers for our endpoints, in its order.
/// Throws like getInfo when the provider offers none.
std::vector<DomainInfo> providerDomains(const std::string& optionProvider);

/// The entries of @p domains (from distinctDomains) named @p names, in the order of @p names. Throws
/// Error(InvalidArgument) naming the first missing domain and listing those @p provider offers.
std::vector<fi_info*> selectDomains(const std::vector<fi_info*>& domains, const std::vector<std::string>& names,
                                    const std::string& provider);

}  // namespace conflux::ofi
