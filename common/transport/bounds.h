// Bounds on what a peer can make a process hold: the largest frame a socket accepts (ZMQ_MAXMSGSIZE), how
// many messages wait per peer (high-water marks), and sending to a ROUTER peer without ever blocking.
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/protocol/codec.h"

namespace pshard::transport {

// The largest data-plane header frame is protocol::kMaxHeaderBytes (16 MiB: 2^18 keys and a tensor list);
// protocol::encode_header() refuses a bigger one, so no legitimate sender makes one.
// The largest control-plane message (coordinator <-> nodes): a cluster map of 2048 nodes with 255-byte host
// names is under 1 MiB.
constexpr int64_t kMaxControlMessageBytes = int64_t(4) << 20;
// Messages that may wait per peer in each direction on a ROUTER (ZMQ_SNDHWM, ZMQ_RCVHWM). A worker has at most
// a few requests per tensor in flight (a model has hundreds of tensors, not thousands), so only a peer that
// does not read its replies reaches it; its replies are then dropped (and counted) instead of queued.
constexpr int kPeerQueueMessages = 8192;

// The largest frame a data-plane socket (server ROUTER, worker DEALER) accepts: a header, or a payload of a
// slice (at most slice_bytes; twice that leaves room for encodings with indices).
int64_t data_max_frame_bytes(uint64_t slice_bytes);

// A binding ROUTER (parameter server, coordinator): frames over `max_frame_bytes` disconnect their peer before
// they are read (ZMQ_MAXMSGSIZE), at most kPeerQueueMessages wait per peer, and ZMQ_ROUTER_MANDATORY so that
// send_to_peer() sees a full or gone peer. Call before bind().
void bound_router(zmq::socket_t& router, int64_t max_frame_bytes);
// A connecting socket (DEALER): only the frame limit; its peers are the job's own servers.
void bound_client(zmq::socket_t& socket, int64_t max_frame_bytes);

enum class Delivery { kSent, kPeerFull, kPeerGone };
// Sends frames[0] (the peer's routing id) and the rest on a bound_router() socket without blocking. A peer over
// its high-water mark (it does not read) or unknown (it left) gets nothing; the frames are released as usual.
Delivery send_to_peer(zmq::socket_t& router, std::vector<zmq::message_t>& frames);
const char* delivery_name(Delivery d);  // "sent", "peer not reading", "peer gone"

// The address of the peer a received frame came from ("127.0.0.1"), or "unknown address".
std::string peer_address(const zmq::message_t& frame);

}  // namespace pshard::transport
