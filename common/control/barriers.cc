// Named barriers: bookkeeping and release.
#include "common/control/barriers.h"

#include "common/control/control.capnp.h"
#include "common/util/log.h"

namespace pshard::coordinator_detail {

void Barriers::enter(const std::string& name, const std::string& id) {
  entered_[{peers_.at(id).info.role, name}].insert(id);
  release_complete();
}

void Barriers::release_complete() {
  for (auto it = entered_.begin(); it != entered_.end();) {
    bool complete = true;
    for (const auto& [id, p] : peers_) {
      if (p.state == Peer::State::kLive && p.info.role == it->first.first && !it->second.count(id)) complete = false;
    }
    if (!complete) {
      ++it;
      continue;
    }
    capnp::MallocMessageBuilder b;
    b.initRoot<control::ControlMessage>().initBarrierRelease().setName(it->first.second);
    for (const std::string& id : it->second) {
      if (peers_.at(id).state == Peer::State::kLive) outbox_.send(id, b);
    }
    PSHARD_LOG(kDebug) << "barrier '" << it->first.second << "' released";
    it = entered_.erase(it);
  }
}

}  // namespace pshard::coordinator_detail
