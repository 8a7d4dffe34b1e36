// Named barriers: bookkeeping and release.
#include "common/control/barriers.h"

#include "common/control/control.capnp.h"
#include "common/util/log.h"

namespace pshard::coordinator_detail {

void Barriers::enter(const std::string& name, const std::string& id, bool vote) {
  Round& round = entered_[{peers_.at(id).info.role, name}];
  round.ids.insert(id);
  round.vote = round.vote || vote;
  release_complete();
}

void Barriers::release_complete() {
  if (entered_.empty()) return;
  // Called after every entry: a round with fewer nodes than its role has live ones cannot be complete, which is all
  // most calls need to see (a step's vote with 64 workers is 64 entries, each of which would otherwise look every
  // node up in every round).
  std::map<NodeRole, size_t> live;
  for (const auto& [id, p] : peers_) {
    if (counts(p)) ++live[p.info.role];
  }
  for (auto it = entered_.begin(); it != entered_.end();) {
    bool complete = it->second.ids.size() >= live[it->first.first];
    for (auto p = peers_.begin(); complete && p != peers_.end(); ++p) {
      if (counts(p->second) && p->second.info.role == it->first.first && !it->second.ids.count(p->first)) {
        complete = false;
      }
    }
    if (!complete) {
      ++it;
      continue;
    }
    capnp::MallocMessageBuilder b;
    auto release = b.initRoot<control::ControlMessage>().initBarrierRelease();
    release.setName(it->first.second);
    release.setAnyVote(it->second.vote);
    for (const std::string& id : it->second.ids) {
      if (peers_.at(id).state == Peer::State::kLive) outbox_.send(id, b);
    }
    PSHARD_LOG(kDebug) << "barrier '" << it->first.second << "' released";
    it = entered_.erase(it);
  }
}

std::optional<std::string> Barriers::stalemate() const {
  std::map<NodeRole, size_t> rounds;  // a stalemate needs two barriers of one role
  for (const auto& [key, round] : entered_) ++rounds[key.first];
  for (NodeRole role : {NodeRole::kServer, NodeRole::kWorker}) {
    if (rounds[role] < 2) continue;
    std::map<std::string, std::set<uint32_t>> waiting;  // barrier -> the ranks that wait in it (named in rank order)
    bool all_waiting = true, any_live = false;
    for (const auto& [id, p] : peers_) {
      if (!counts(p) || p.info.role != role) continue;
      any_live = true;
      bool in_one = false;
      for (const auto& [key, round] : entered_) {
        if (key.first != role || !round.ids.count(id)) continue;
        in_one = true;
        waiting[key.second].insert(p.info.rank);
      }
      all_waiting = all_waiting && in_one;
    }
    if (!any_live || !all_waiting || waiting.size() < 2) continue;
    std::string why = std::string("the ") + role_name(role) +
                      "s wait in different barriers, so none can be released (every live one waits, each barrier "
                      "needs all of them): ";
    bool first = true;
    for (const auto& [name, ranks] : waiting) {
      std::string who;
      for (uint32_t r : ranks)
        who += (who.empty() ? "" : ", ") + std::string(role_name(role)) + " " + std::to_string(r);
      why += (first ? "'" : ", '") + name + "' (" + who + ")";
      first = false;
    }
    return why + "; every rank must call its barriers with the same names in the same order";
  }
  return std::nullopt;
}

}  // namespace pshard::coordinator_detail
