// Frame limits, per-peer queue bounds and non-blocking ROUTER sends (see bounds.h).
#include "common/transport/bounds.h"

#include <algorithm>
#include <cerrno>

namespace pshard::transport {

int64_t data_max_frame_bytes(uint64_t slice_bytes) {
  return std::max<int64_t>(static_cast<int64_t>(protocol::kMaxHeaderBytes), 2 * static_cast<int64_t>(slice_bytes) + 64);
}

void bound_router(zmq::socket_t& router, int64_t max_frame_bytes) {
  router.set(zmq::sockopt::maxmsgsize, max_frame_bytes);
  router.set(zmq::sockopt::sndhwm, kPeerQueueMessages);
  router.set(zmq::sockopt::rcvhwm, kPeerQueueMessages);
  router.set(zmq::sockopt::router_mandatory, 1);
}

void bound_client(zmq::socket_t& socket, int64_t max_frame_bytes) {
  socket.set(zmq::sockopt::maxmsgsize, max_frame_bytes);
}

Delivery send_to_peer(zmq::socket_t& router, std::vector<zmq::message_t>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    const bool last = i + 1 == frames.size();
    const zmq::send_flags flags =
        last ? zmq::send_flags::dontwait : zmq::send_flags::sndmore | zmq::send_flags::dontwait;
    try {
      // With ZMQ_ROUTER_MANDATORY only the routing-id frame can fail: EAGAIN when the peer's queue is full,
      // EHOSTUNREACH when no such peer is connected. Once it is accepted the rest of the message follows.
      if (!router.send(frames[i], flags)) return Delivery::kPeerFull;
    } catch (const zmq::error_t& e) {
      if (i == 0 && e.num() == EHOSTUNREACH) return Delivery::kPeerGone;
      throw;
    }
  }
  return Delivery::kSent;
}

const char* delivery_name(Delivery d) {
  switch (d) {
    case Delivery::kSent: return "sent";
    case Delivery::kPeerFull: return "peer not reading";
    case Delivery::kPeerGone: return "peer gone";
  }
  return "?";
}

std::string peer_address(const zmq::message_t& frame) {
  const char* a = zmq_msg_gets(const_cast<zmq_msg_t*>(frame.handle()), "Peer-Address");
  return a ? std::string(a) : std::string("unknown address");
}

}  // namespace pshard::transport
