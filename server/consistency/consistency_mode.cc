// cluster.mode as a Consistency.
#include "server/consistency/consistency_mode.h"

#include "common/error.h"

namespace pshard {

Consistency consistency_from_string(const std::string& mode) {
  if (mode == "sync" || mode == "bsp") return Consistency::kBsp;
  if (mode == "async" || mode == "asp") return Consistency::kAsp;
  if (mode == "ssp") return Consistency::kSsp;
  throw Error("cluster.mode must be sync, async or ssp, got '" + mode + "'");
}

}  // namespace pshard
