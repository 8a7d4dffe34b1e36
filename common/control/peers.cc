// The coordinator's peer table helpers and outbox.
#include "common/control/peers.h"

#include <vector>

#include "common/control/control_codec.h"
#include "common/transport/bounds.h"

namespace pshard::coordinator_detail {

bool reachable(const Peer& p) { return p.state == Peer::State::kRegistered || p.state == Peer::State::kLive; }

std::string describe_unranked(const Peer& p) {
  std::string s = std::string(role_name(p.info.role));
  if (p.requested_rank >= 0) s += " (requested rank " + std::to_string(p.requested_rank) + ")";
  return s + " from host " + p.info.host + ", pid " + std::to_string(p.info.pid);
}

void Outbox::send(const std::string& id, capnp::MessageBuilder& message) {
  std::vector<zmq::message_t> frames;
  frames.emplace_back(id.data(), id.size());
  frames.push_back(control_codec::encode(message));
  if (transport::send_to_peer(router_, frames) != transport::Delivery::kSent) ++dropped_;
}

}  // namespace pshard::coordinator_detail
