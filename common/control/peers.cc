// The coordinator's peer table helpers and outbox.
#include "common/control/peers.h"

#include <vector>

#include "common/control/control_codec.h"
#include "common/transport/bounds.h"

namespace pshard::coordinator_detail {

bool reachable(const Peer& p) { return p.state == Peer::State::kRegistered || p.state == Peer::State::kLive; }

std::string one_line(const char* text, size_t max_bytes) {
  std::string s = std::string(text).substr(0, max_bytes);
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return s;
}

Peer* live_process(Peers& peers, NodeRole role, bool any_rank, uint32_t rank, int64_t pid,
                   const std::string& locality) {
  for (auto& [id, p] : peers) {
    if (p.state == Peer::State::kLive && p.info.role == role && p.info.pid == pid &&
        (any_rank || p.info.rank == rank) && (locality.empty() || p.info.locality == locality)) {
      return &p;
    }
  }
  return nullptr;
}

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
