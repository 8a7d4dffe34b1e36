// EpochPlans: the epoch starts of an elastic job.
#include "common/control/epoch_plans.h"

#include <algorithm>
#include <vector>

#include "common/control/control_codec.h"
#include "common/util/log.h"

namespace pshard::coordinator_detail {
namespace {

std::string rank_list(const std::vector<uint32_t>& ranks) {  // "0, 1, 3"
  std::string s;
  for (uint32_t r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

EpochPlans::EpochPlans(const Coordinator::Options& options, const Peers& peers, Outbox& outbox, PlanHook on_plan)
    : opt_(options), peers_(peers), outbox_(outbox), on_plan_(std::move(on_plan)) {}

void EpochPlans::enter(const Peer& p, int64_t epoch, int64_t step) {
  if (p.info.role != NodeRole::kWorker) return;
  if (epoch <= 0) {
    arrived_.insert(p.id);
    joiners_.insert(p.id);
  } else if (epoch != plan_.epoch + 1 && !broken_) {
    broken_ = control_codec::describe(p.info) + " is at the start of epoch " + std::to_string(epoch) +
              ", but the job's next epoch is " + std::to_string(plan_.epoch + 1);
    return;
  } else {
    entered_[p.id] = step;
  }
  try_release(Clock::now());
}

void EpochPlans::joined(const Peer& p, int64_t epoch) {
  if (epoch != plan_.epoch || joining_.erase(p.id) == 0) return;
  try_release(Clock::now());
}

void EpochPlans::worker_gone(const Peer& p) {
  entered_.erase(p.id);
  arrived_.erase(p.id);
  joiners_.erase(p.id);
  joining_.erase(p.id);  // a plan is never changed: its members go on without the dead one
  waiting_members_.erase(p.id);
  try_release(Clock::now());
}

bool EpochPlans::waiting_to_join(const Peer& p) const { return arrived_.count(p.id) > 0; }

std::optional<std::string> EpochPlans::check(Clock::time_point now) {
  if (broken_) return broken_;
  try_release(now);
  if (short_since_ && now - *short_since_ > opt_.rendezvous_timeout) {
    const size_t here = entered_.size() + joiners_.size();
    return "epoch " + std::to_string(plan_.epoch + 1) + " has " + std::to_string(here) +
           (here == 1 ? " worker" : " workers") +
           ", fewer than cluster.min_workers = " + std::to_string(opt_.min_workers) + ", and none joined in " +
           std::to_string(opt_.rendezvous_timeout.count()) + " ms (cluster.rendezvous_timeout_ms)";
  }
  return std::nullopt;
}

void EpochPlans::send(const std::set<std::string>& ids, bool join) {
  capnp::MallocMessageBuilder b;
  auto ep = b.initRoot<control::ControlMessage>().initEpochPlan();
  ep.setEpoch(plan_.epoch);
  ep.setFirstStep(plan_.first_step);
  ep.setJoin(join);
  auto members = ep.initMembers(static_cast<unsigned>(plan_.members.size()));
  for (size_t i = 0; i < plan_.members.size(); ++i) members.set(static_cast<unsigned>(i), plan_.members[i]);
  for (const std::string& id : ids) outbox_.send(id, b);
}

void EpochPlans::try_release(Clock::time_point now) {
  if (broken_) return;
  if (!waiting_members_.empty() || !joining_.empty()) {  // the current plan is still going out
    if (!joining_.empty()) return;
    send(waiting_members_, false);
    waiting_members_.clear();
  }
  if (entered_.empty()) return;  // no worker has finished an epoch: nothing to start from
  for (const auto& [id, p] : peers_) {
    if (p.info.role != NodeRole::kWorker || p.state != Peer::State::kLive) continue;
    // A worker still training the epoch holds its end up; one that joined and is still starting does not.
    if (!entered_.count(id) && !arrived_.count(id)) return;
  }
  const int64_t epoch = plan_.epoch + 1;
  const int64_t step = entered_.begin()->second;
  for (const auto& [id, s] : entered_) {
    if (s != step) {
      broken_ = "the workers disagree on the first step of epoch " + std::to_string(epoch) + ": " +
                control_codec::describe(peers_.at(id).info) + " says " + std::to_string(s) + ", " +
                control_codec::describe(peers_.at(entered_.begin()->first).info) + " says " + std::to_string(step);
      return;
    }
  }
  // Workers join from the second epoch on: the first one's members are the ones the rendezvous admitted, and a
  // worker can only be counted from a step whose weights the servers have.
  const bool joins = epoch >= 2 && !joiners_.empty();
  const size_t count = entered_.size() + (joins ? joiners_.size() : 0);
  if (count < opt_.min_workers) {
    if (!short_since_) {
      short_since_ = now;
      PSHARD_LOG(kWarn) << "epoch " << epoch << " waits for workers to join: " << count << " of at least "
                        << opt_.min_workers << " (cluster.min_workers) are here";
    }
    return;
  }
  short_since_.reset();
  EpochPlan next;
  next.epoch = epoch;
  next.first_step = step;
  std::set<std::string> members, joining;
  for (const auto& [id, s] : entered_) members.insert(id);
  if (joins) joining = joiners_;
  for (const std::string& id : members) next.members.push_back(peers_.at(id).info.rank);
  for (const std::string& id : joining) next.members.push_back(peers_.at(id).info.rank);
  std::sort(next.members.begin(), next.members.end());
  plan_ = next;
  entered_.clear();
  if (joins) {
    for (const std::string& id : joiners_) arrived_.erase(id);
    joiners_.clear();
  }
  std::set<std::string> everyone = members;
  everyone.insert(joining.begin(), joining.end());
  if (on_plan_) on_plan_(plan_, everyone);

  // What changed since the epoch before, by process (a worker that joins may take a dead one's rank).
  std::string gone, added;
  for (const std::string& id : member_ids_) {
    if (everyone.count(id)) continue;
    auto p = peers_.find(id);
    gone += (gone.empty() ? "" : ", ") + (p != peers_.end() ? control_codec::describe(p->second.info) : id);
  }
  for (const std::string& id : everyone) {
    if (epoch > 1 && !member_ids_.count(id))
      added += (added.empty() ? "" : ", ") + control_codec::describe(peers_.at(id).info);
  }
  member_ids_ = everyone;
  const std::string change = (gone.empty() ? "" : "; without " + gone) + (added.empty() ? "" : "; joined: " + added);
  PSHARD_LOG(kInfo) << "epoch " << epoch << " starts at step " << step << " with " << plan_.members.size()
                    << " workers (ranks " << rank_list(plan_.members) << ")" << change;
  if (joining.empty()) {
    send(members, false);
    return;
  }
  joining_ = joining;
  waiting_members_ = members;
  send(joining, true);
}

}  // namespace pshard::coordinator_detail
