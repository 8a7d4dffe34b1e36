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
  uint32_t num_workers = 0;       // elastic jobs: the most workers (ranks 0 .. num_workers - 1)
  uint32_t min_workers = 0;       // elastic jobs (cluster.min_workers): the fewest an epoch trains with; 0: fixed
  std::vector<NodeInfo> servers;  // index = server rank
  std::vector<NodeInfo> workers;  // index = worker rank; a rank no process holds (elastic jobs) has pid 0

  bool elastic() const { return min_workers > 0; }
  // Elastic jobs: no process holds worker rank `rank` (yet).
  bool vacant(uint32_t rank) const { return rank < workers.size() && workers[rank].pid == 0; }
};

// Who trains one epoch of an elastic job (control.capnp EpochPlan).
struct EpochPlan {
  int64_t epoch = 0;
  int64_t first_step = 0;
  std::vector<uint32_t> members;  // worker ranks, increasing
  bool join = false;              // to a worker that joins the running job with this epoch
};

}  // namespace pshard
