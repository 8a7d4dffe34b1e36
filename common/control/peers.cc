// The coordinator's peer table helpers and outbox.
#include "common/control/peers.h"

#include "common/control/control_codec.h"

namespace pshard::coordinator_detail {

bool reachable(const Peer& p) { return p.state == Peer::State::kRegistered || p.state == Peer::State::kLive; }

std::string describe_unranked(const Peer& p) {
  std::string s = std::string(role_name(p.info.role));
  if (p.requested_rank >= 0) s += " (requested rank " + std::to_string(p.requested_rank) + ")";
  return s + " from host " + p.info.host + ", pid " + std::to_string(p.info.pid);
}

void Outbox::send(const std::string& id, capnp::MessageBuilder& message) {
  zmq::message_t frame = control_codec::encode(message);
  // ROUTER drops messages to unknown or gone peers instead of blocking.
  (void)router_.send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  (void)router_.send(frame, zmq::send_flags::dontwait);
}

}  // namespace pshard::coordinator_detail
