// The hosts of `pshard launch --hosts h1:4,h2:4`: where ssh connects and how many workers each host runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pshard::remote {

struct RemoteHost {
  std::string target;   // what ssh connects to, as given: "node1", "alice@node1"
  std::string name;     // the host name without "user@": its address is what peers connect to
  int64_t workers = 1;  // workers on this host (":N"; 1 when no count is given)
};

// Parses "h1:4,h2:4" (entries HOST or USER@HOST, each with an optional ":WORKERS" in 0..1024). Throws
// pshard::Error naming the entry for an empty entry, a bad count, a host listed twice, or no worker at all.
//
//   parse_hosts("node1:2,alice@node2:3")   // {{"node1", "node1", 2}, {"alice@node2", "node2", 3}}
std::vector<RemoteHost> parse_hosts(const std::string& spec);

}  // namespace pshard::remote
