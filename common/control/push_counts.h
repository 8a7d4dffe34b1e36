// The workers' push counts (Leave.stepsPushed): the job's workers push the same steps (a sync step waits for every
// worker; in any mode each trains a shard of the same size), so a worker that left cleanly with fewer pushes than
// another left early. Pure functions over the coordinator's peers (coordinator.cc applies the verdicts).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/control/peers.h"

namespace pshard::coordinator_detail {

// The worker that pushed most and its count: the workers that left (Peer::pushed), and `live` when given (a live
// worker's step line says it pushed `live_pushed`). nullopt when no count is known.
struct MostPushed {
  NodeInfo worker;
  int64_t pushed = -1;
};
std::optional<MostPushed> most_pushed(const Peers& peers, const NodeInfo* live = nullptr, int64_t live_pushed = -1);

// The ids of the workers that left cleanly with fewer pushes than `most`, each the job's failure.
std::vector<std::string> short_of(const Peers& peers, const MostPushed& most);

// Why a worker that left after `pushed` steps is short of `most`.
std::string short_reason(int64_t pushed, const MostPushed& most);

}  // namespace pshard::coordinator_detail
