// JobEvents: the dead workers and the abort, as the coordinator announced them.
#include "worker/session/job_events.h"

#include <algorithm>

namespace pshard {

void JobEvents::listen(ClusterClient& cluster, std::function<void(const std::string& reason)> on_abort) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    on_abort_ = std::move(on_abort);
  }
  cluster.on_event([this](const ClusterEvent& e) { record(e); });
}

void JobEvents::record(const ClusterEvent& e) {
  std::function<void(const std::string&)> abort;
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (e.kind == ClusterEvent::Kind::kNodeDead && e.node.role == NodeRole::kWorker) dead_.insert(e.node.rank);
    if (e.kind == ClusterEvent::Kind::kAbort) {
      if (abort_reason_.empty()) abort_reason_ = e.reason.empty() ? "no reason given" : e.reason;
      reason = abort_reason_;
      abort = on_abort_;
    }
  }
  if (abort) abort(reason);
}

std::string JobEvents::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return abort_reason_;
}

bool JobEvents::initialiser(uint32_t rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t r = 0; r < rank; ++r) {
    if (dead_.count(r) == 0) return false;
  }
  return true;
}

void JobEvents::members_are_live(const std::vector<uint32_t>& members) {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t r : members) dead_.erase(r);
}

bool JobEvents::lowest_alive(uint32_t rank, const std::vector<uint32_t>& members) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t r = 0; r < rank; ++r) {
    const bool member = members.empty() || std::count(members.begin(), members.end(), r) > 0;
    if (member && dead_.count(r) == 0) return false;
  }
  return true;
}

}  // namespace pshard
