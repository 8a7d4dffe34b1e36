// Parsing of the --hosts list (see host_list.h).
#include "launcher/remote/host_list.h"

#include <set>

#include "common/error.h"

namespace pshard::remote {

std::vector<RemoteHost> parse_hosts(const std::string& spec) {
  const std::string what = "--hosts " + spec + ": ";
  std::vector<RemoteHost> hosts;
  std::set<std::string> seen;
  int64_t workers = 0;
  size_t begin = 0;
  while (begin <= spec.size()) {
    size_t end = spec.find(',', begin);
    if (end == std::string::npos) end = spec.size();
    const std::string entry = spec.substr(begin, end - begin);
    begin = end + 1;
    if (entry.empty()) throw Error(what + "an empty entry (expected HOST[:WORKERS],HOST[:WORKERS],...)");
    RemoteHost h;
    h.target = entry;
    const size_t colon = entry.rfind(':');
    if (colon != std::string::npos) {
      h.target = entry.substr(0, colon);
      const std::string count = entry.substr(colon + 1);
      if (count.empty() || count.size() > 4 || count.find_first_not_of("0123456789") != std::string::npos ||
          std::stoll(count) > 1024) {
        throw Error(what + "the worker count of '" + entry + "' must be a number in 0..1024");
      }
      h.workers = std::stoll(count);
    }
    const size_t at = h.target.rfind('@');
    h.name = at == std::string::npos ? h.target : h.target.substr(at + 1);
    if (h.name.empty() || h.target.find_first_of(" \t\n'\"\\") != std::string::npos || h.target[0] == '-') {
      throw Error(what + "'" + entry + "' is not a host name (HOST or USER@HOST, then :WORKERS)");
    }
    if (!seen.insert(h.name).second) throw Error(what + h.name + " is listed twice");
    workers += h.workers;
    hosts.push_back(h);
  }
  if (workers == 0) throw Error(what + "no host runs a worker");
  if (workers > 1024) throw Error(what + std::to_string(workers) + " workers in all; at most 1024");
  return hosts;
}

}  // namespace pshard::remote
