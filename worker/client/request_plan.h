// RequestPlan: which server each slice of one KV request goes to and which way its payload travels, decided in one
// pure function (no sockets, no shared memory) that KvClient executes.
//
//   RequestPlanInputs in;
//   in.type = MessageType::PUSH_PULL;
//   in.copy = false;                                         // zpush_pull: the caller keeps its buffer alive
//   in.shared_memory_to = [&](uint32_t s) { return link_up(s); };
//   for (const PlannedPart& part : plan_request(layout, layout.tensor_id("fc1.weight"), in)) {
//     // part.server, part.type (as sent), part.role, and per slice part.ids[k] with part.routes[k]
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/keys/slice_layout.h"
#include "common/protocol/codec.h"

namespace pshard {

// How one slice's payload (a gradient, or the initial weights) reaches its server.
enum class SliceRoute : uint8_t {
  kNoPayload,    // a pull or a join: only the header goes out, the weights come back
  kTcpCopy,      // copied into a frame on the caller's thread (init, push(): the caller may reuse its buffer at once)
  kTcpBorrowed,  // zpush over TCP: the frame borrows the caller's memory until ZeroMQ has sent it
  kTcpEncoded,   // compressed into a frame on the caller's thread (cluster.compression, with error feedback)
  kShmInline,    // copied into its push slot of the server's shared memory on the caller's thread
  kShmCopier,    // copied into its push slot by the copier thread, which then sends the part (large zpush slices)
  kToLeader,     // host aggregation, a member: into the host segment, for the host's leader to sum and push
  kHostSum,      // host aggregation, the leader: summed with the members' by the host thread, then sent
};

// Who sends a part to its server, and who reads the weights that come back.
enum class PartRole : uint8_t {
  kOwn,         // this worker sends it for itself
  kHostMember,  // this host's leader sends it; a push_pull's weights are read from the host segment
  kHostLeader,  // this worker sends it for its host's workers (a push_pull whatever was asked), publishing the weights
};

// One server's share of a request.
struct PlannedPart {
  uint32_t server = 0;
  uint32_t stream = 0;  // the connection to `server` that carries it: 0 .. streams - 1
  PartRole role = PartRole::kOwn;
  protocol::MessageType type = protocol::MessageType::INVALID;  // as sent to the server
  bool shared_memory = false;      // payloads and weights through the server's shared memory (float32 both ways)
  std::vector<uint32_t> ids;       // global slice ids, in slice order
  std::vector<SliceRoute> routes;  // per slice, beside ids
};

// What a plan depends on besides the layout: the call and what the client knows of its servers and its host.
struct RequestPlanInputs {
  protocol::MessageType type = protocol::MessageType::INVALID;  // INIT, PUSH, PULL, PUSH_PULL or JOIN
  bool copy = true;  // the caller may reuse its buffer at once (init, push, push_pull); false for the z-calls
  // The whole tensor's encodings (a tensor travels one way): the push's (NONE unless it pushes) and the reply's.
  protocol::Encoding push_encoding = protocol::Encoding::NONE;
  protocol::Encoding pull_encoding = protocol::Encoding::NONE;
  // Host aggregation: per server, whether this host pushes to it once for all its workers (nullptr or empty: none;
  // the caller's, which outlives the call); whether this worker is its host's leader.
  const std::vector<char>* host_aggregated = nullptr;
  bool host_leader = false;
  // Payloads up to this size go into a push slot on the caller's thread even for a zpush: the copier's thread hand-off
  // costs more than a small copy.
  size_t copier_min_bytes = 64u << 10;
  // cluster.streams_per_server: each slice's connection to its server (assign_streams; nullptr: one connection). A part
  // this worker sends over TCP for itself is cut into one part per connection (a slice always takes the same one, so
  // its requests stay in order); parts through shared memory and a host's parts stay whole, on connection 0.
  const std::vector<uint32_t>* stream_of = nullptr;
  // Whether float32 payloads to server s may go through shared memory. Asked only for parts that could use it (not
  // init, not an encoded tensor, not a host member's), once per part, in server order: it may try to set the link up.
  std::function<bool(uint32_t)> shared_memory_to;
};

// The request's parts: one per server holding some of `tensor`'s slices (with several streams, one per connection that
// carries some of them), in server order, then connection order.
std::vector<PlannedPart> plan_request(const SliceLayout& layout, uint32_t tensor, const RequestPlanInputs& in);

// Each slice's connection to its server, for `streams` connections per server: per server, its slices largest first
// onto the connection with the fewest bytes so far (ties: the lowest), so that each connection carries about 1/streams
// of the server's bytes. All 0 for one stream.
std::vector<uint32_t> assign_streams(const SliceLayout& layout, uint32_t streams);

// "shm-copier" and the like, for logs and test messages.
const char* route_name(SliceRoute route);

}  // namespace pshard
