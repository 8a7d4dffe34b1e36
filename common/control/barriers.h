// Named barriers of a job: each is released once every live node of its role has entered it (internal).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "common/control/peers.h"

namespace pshard::coordinator_detail {

// A barrier belongs to the role of the nodes that enter it (workers wait for the workers, not for the servers) and
// waits only for the nodes live now: a node that dies or leaves no longer holds it up, so the coordinator calls
// release_complete() after every such change.
class Barriers {
 public:
  Barriers(const Peers& peers, Outbox& outbox) : peers_(peers), outbox_(outbox) {}
  // Elastic jobs: live workers that `aside(peer)` holds (those waiting to join at the next epoch's start) are in no
  // barrier of the others and hold none up.
  void set_aside(std::function<bool(const Peer&)> aside) { aside_ = std::move(aside); }

  // Node `id` entered barrier `name`, raising its flag or not (`vote`); releases it if every live node has now entered.
  void enter(const std::string& name, const std::string& id, bool vote = false);
  // Sends barrierRelease for every barrier that all live nodes have entered, saying whether any of them voted.
  void release_complete();
  // After release_complete(): when every live node of a role waits in a barrier and none of them can be released (the
  // nodes named their barriers differently), why, naming each barrier and who waits in it, e.g. "the workers wait in
  // different barriers, so none can be released: 'epoch 1' (worker 0), 'epoch 2' (worker 1)"; else nullopt.
  std::optional<std::string> stalemate() const;

 private:
  bool counts(const Peer& p) const { return p.state == Peer::State::kLive && !(aside_ && aside_(p)); }

  const Peers& peers_;
  Outbox& outbox_;
  std::function<bool(const Peer&)> aside_;
  struct Round {
    std::set<std::string> ids;  // routing ids of the nodes in it
    bool vote = false;          // one of them raised its flag
  };
  std::map<std::pair<NodeRole, std::string>, Round> entered_;  // (role, name) -> the round waiting for release
};

}  // namespace pshard::coordinator_detail
