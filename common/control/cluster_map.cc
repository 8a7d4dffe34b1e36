// Names of node roles.
#include "common/control/cluster_map.h"

namespace pshard {

const char* role_name(NodeRole role) {
  switch (role) {
    case NodeRole::kCoordinator: return "coordinator";
    case NodeRole::kServer: return "server";
    case NodeRole::kWorker: return "worker";
  }
  return "unknown";
}

}  // namespace pshard
