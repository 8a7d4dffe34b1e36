// Who is where in a job: the cluster map the coordinator hands every node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pshard {

enum class NodeRole { kCoordinator = 0, kServer = 1, kWorker = 2 };

const char* role_name(NodeRole role);  // "coordinator", "server", "worker"

// One registered process.
struct NodeInfo {
  NodeRole role = NodeRole::kWorker;
  uint32_t rank = 0;     // rank within its role, 0-based
  std::string endpoint;  // servers: the ZeroMQ ROUTER endpoint peers connect to ("tcp://10.0.0.2:40001")
  std::string host;      // host name the process runs on (for logs and reports)
  int64_t pid = 0;       // process id on that host (for logs)
  std::string locality;  // host_locality() of the process: equal values share memory (common/util/host.h)
};

// The full membership of a job, identical on every node after rendezvous.
struct ClusterMap {
  uint32_t num_servers = 0;
  uint32_t num_workers = 0;
  std::vector<NodeInfo> servers;  // index = server rank
  std::vector<NodeInfo> workers;  // index = worker rank
};

}  // namespace pshard
