// The IPv4 address a node advertises to its peers: its name's address, or the one on a given interface.
#pragma once

#include <string>
#include <vector>

namespace pshard::scheduler {

// IPv4 addresses of this machine's interfaces that are up: {"lo 127.0.0.1", "eth0 10.0.0.5", ...}.
struct LocalAddress {
  std::string iface;
  std::string ipv4;
};
std::vector<LocalAddress> local_ipv4_addresses();

// The first IPv4 address `host` resolves to (getaddrinfo). Throws pshard::Error
// naming the host when it does not resolve.
//
//   resolve_ipv4("node1")   // "10.250.77.11"
std::string resolve_ipv4(const std::string& host);

// The IPv4 address on interface `iface`. Throws pshard::Error naming the
// interface and listing the ones that exist when it has none.
std::string interface_ipv4(const std::string& iface);

// The address this node advertises: interface_ipv4(iface) when `iface` is
// given, else resolve_ipv4(node_name), which must be one of this machine's
// addresses (else peers could not reach what we bind): a clear Error that
// says to use --iface instead.
std::string advertised_address(const std::string& node_name, const std::string& iface);

}  // namespace pshard::scheduler
