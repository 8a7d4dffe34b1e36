// Liveness: heartbeat echo, silence detection, failure policy.
#include "common/control/liveness.h"

#include "common/control/control.capnp.h"
#include "common/control/control_codec.h"

namespace pshard::coordinator_detail {

void Liveness::echo(const std::string& id, uint64_t seq) {
  capnp::MallocMessageBuilder b;
  auto h = b.initRoot<control::ControlMessage>().initHeartbeat();
  h.setSeq(seq);
  h.setCoordinatorClockNs(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
  outbox_.send(id, b);
}

std::vector<std::string> Liveness::silent(Clock::time_point now) const {
  std::vector<std::string> ids;
  for (const auto& [id, p] : peers_) {
    if (reachable(p) && now - p.last_seen > opt_.heartbeat_timeout) ids.push_back(id);
  }
  return ids;
}

std::string Liveness::silence() const {
  return "no heartbeat for " + std::to_string(opt_.heartbeat_timeout.count()) + " ms";
}

void Liveness::announce_dead(const Peer& dead, const std::string& why) {
  capnp::MallocMessageBuilder b;
  auto nd = b.initRoot<control::ControlMessage>().initNodeDead();
  control_codec::fill_node(dead.info, nd.initNode());
  nd.setReason(why);
  outbox_.broadcast(peers_, b, [](const Peer& q) { return q.state == Peer::State::kLive; });
}

void Liveness::announce_left(const Peer& left) {
  capnp::MallocMessageBuilder b;
  auto nd = b.initRoot<control::ControlMessage>().initNodeDead();
  control_codec::fill_node(left.info, nd.initNode());
  nd.setReason("after " + std::to_string(left.pushed) + " pushed steps");
  nd.setLeft(true);
  outbox_.broadcast(peers_, b,
                    [](const Peer& q) { return q.state == Peer::State::kLive && q.info.role == NodeRole::kServer; });
}

void Liveness::dismiss(const Peer& stuck, const std::string& reason) {
  capnp::MallocMessageBuilder b;
  auto a = b.initRoot<control::ControlMessage>().initAbort();
  a.setReason(reason);
  a.setHasDeadNode(true);
  control_codec::fill_node(stuck.info, a.initDeadNode());
  outbox_.send(stuck.id, b);
}

}  // namespace pshard::coordinator_detail
