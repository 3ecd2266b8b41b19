// Choice of the address a new job's store listens on (pickBindHost, declared in store_server.h).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <memory>
#include <string>

#include "core/bootstrap/socket.h"
#include "core/bootstrap/store_server.h"
#include "core/config.h"
#include "core/error.h"

namespace conflux::bootstrap {
namespace {

std::string numericHost(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "";
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, host, sizeof host);
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, host, sizeof host);
  }
  return host;
}

bool usableV6(const sockaddr* sa) {
  const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
  return !IN6_IS_ADDR_LINKLOCAL(&a);  // link-local needs a scope id that other hosts cannot use
}

}  // namespace

std::string pickBindHost(bool allLocal) {
  const std::string ifname = config::getString(config::Var::SOCKET_IFNAME);
  if (ifname.empty() && allLocal) return "127.0.0.1";
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) throwSystemError("bootstrap: getifaddrs");
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> list(raw, freeifaddrs);
  // Pass 0: IPv4, pass 1: IPv6.
  for (int pass = 0; pass < 2; ++pass) {
    const int family = pass == 0 ? AF_INET : AF_INET6;
    for (ifaddrs* i = list.get(); i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != family || !(i->ifa_flags & IFF_UP)) continue;
      if (family == AF_INET6 && !usableV6(i->ifa_addr)) continue;
      if (!ifname.empty()) {
        if (ifname == i->ifa_name) return numericHost(i->ifa_addr);
      } else if (!(i->ifa_flags & IFF_LOOPBACK)) {
        return numericHost(i->ifa_addr);
      }
    }
  }
  if (!ifname.empty()) {
    throw Error(Code::InvalidArgument, "CONFLUX_SOCKET_IFNAME='" + ifname +
                                           "': no interface of that name is up with an IPv4 or IPv6 address");
  }
  return "127.0.0.1";
}

}  // namespace conflux::bootstrap
