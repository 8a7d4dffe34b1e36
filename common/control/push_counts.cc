// The workers' push counts (see push_counts.h).
#include "common/control/push_counts.h"

#include "common/control/control_codec.h"

namespace pshard::coordinator_detail {

std::optional<MostPushed> most_pushed(const Peers& peers, const NodeInfo* live, int64_t live_pushed) {
  MostPushed most;
  if (live) most = {*live, live_pushed};
  for (const auto& [id, q] : peers) {
    if (q.info.role == NodeRole::kWorker && q.state == Peer::State::kLeft && q.pushed > most.pushed) {
      most = {q.info, q.pushed};
    }
  }
  if (most.pushed < 0) return std::nullopt;
  return most;
}

std::vector<std::string> short_of(const Peers& peers, const MostPushed& most) {
  std::vector<std::string> ids;
  for (const auto& [id, q] : peers) {
    if (q.info.role == NodeRole::kWorker && q.state == Peer::State::kLeft && q.pushed >= 0 && q.pushed < most.pushed) {
      ids.push_back(id);
    }
  }
  return ids;
}

std::string short_reason(int64_t pushed, const MostPushed& most) {
  return "it left after " + std::to_string(pushed) + " pushed steps, while " + control_codec::describe(most.worker) +
         " pushed " + std::to_string(most.pushed) + " (every worker of the job pushes the same steps)";
}

}  // namespace pshard::coordinator_detail
