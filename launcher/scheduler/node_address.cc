// Node addresses for SLURM jobs: name resolution and interface addresses (see node_address.h).
#include "launcher/scheduler/node_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "common/error.h"

namespace pshard::scheduler {

std::vector<LocalAddress> local_ipv4_addresses() {
  std::vector<LocalAddress> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throw Error(std::string("getifaddrs failed: ") + std::strerror(errno));
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || (a->ifa_flags & IFF_UP) == 0) continue;
    char buf[INET_ADDRSTRLEN] = {0};
    const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf) == nullptr) continue;
    out.push_back({a->ifa_name, buf});
  }
  freeifaddrs(list);
  return out;
}

namespace {
std::string describe(const std::vector<LocalAddress>& addrs) {
  std::string s;
  for (const LocalAddress& a : addrs) s += (s.empty() ? "" : ", ") + a.iface + " " + a.ipv4;
  return s.empty() ? "none" : s;
}
}  // namespace

std::string resolve_ipv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    throw Error("node name '" + host + "' does not resolve to an IPv4 address (" + gai_strerror(rc) +
                "); pass --iface IFACE to advertise that interface's address");
  }
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf);
  freeaddrinfo(res);
  return buf;
}

std::string interface_ipv4(const std::string& iface) {
  const std::vector<LocalAddress> addrs = local_ipv4_addresses();
  for (const LocalAddress& a : addrs) {
    if (a.iface == iface) return a.ipv4;
  }
  throw Error("--iface " + iface + ": no IPv4 address on that interface (interfaces with one: " + describe(addrs) +
              ")");
}

std::string advertised_address(const std::string& node_name, const std::string& iface) {
  if (!iface.empty()) return interface_ipv4(iface);
  const std::string ip = resolve_ipv4(node_name);
  const std::vector<LocalAddress> addrs = local_ipv4_addresses();
  for (const LocalAddress& a : addrs) {
    if (a.ipv4 == ip) return ip;
  }
  throw Error("node name '" + node_name + "' resolves to " + ip +
              ", which is not an address of this machine (it has: " + describe(addrs) +
              "); peers could not reach this node there. Pass --iface IFACE to advertise an interface's address");
}

}  // namespace pshard::scheduler
