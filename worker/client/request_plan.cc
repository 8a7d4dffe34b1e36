// plan_request: a KV request's parts and each slice's route, from the layout and what the client knows
// (request_plan.h).
#include "worker/client/request_plan.h"

#include <algorithm>
#include <map>

namespace pshard {

using protocol::Encoding;
using protocol::MessageType;

namespace {

bool pushes(MessageType type) { return type == MessageType::PUSH || type == MessageType::PUSH_PULL; }

// A part this worker sends (for itself or, as a host's leader, for its host): the route of one slice's payload.
SliceRoute own_route(const RequestPlanInputs& in, bool shared_memory, uint64_t bytes) {
  if (!protocol::carries_payloads(in.type)) return SliceRoute::kNoPayload;
  if (shared_memory) return in.copy || bytes <= in.copier_min_bytes ? SliceRoute::kShmInline : SliceRoute::kShmCopier;
  if (in.push_encoding != Encoding::NONE) return SliceRoute::kTcpEncoded;
  return in.copy ? SliceRoute::kTcpCopy : SliceRoute::kTcpBorrowed;
}

PartRole role_for(const RequestPlanInputs& in, uint32_t server) {
  const bool aggregated = pushes(in.type) && in.host_aggregated != nullptr && server < in.host_aggregated->size() &&
                          (*in.host_aggregated)[server] != 0;
  if (!aggregated) return PartRole::kOwn;
  return in.host_leader ? PartRole::kHostLeader : PartRole::kHostMember;
}

// `whole`'s slices as one part per connection that carries some of them, in connection order.
void split_by_stream(const PlannedPart& whole, const std::vector<uint32_t>& stream_of, std::vector<PlannedPart>& out) {
  std::map<uint32_t, PlannedPart> by_stream;
  for (size_t k = 0; k < whole.ids.size(); ++k) {
    PlannedPart& p = by_stream[stream_of.at(whole.ids[k])];
    p.ids.push_back(whole.ids[k]);
    p.routes.push_back(whole.routes[k]);
  }
  for (auto& [stream, p] : by_stream) {
    p.server = whole.server;
    p.stream = stream;
    p.role = whole.role;
    p.type = whole.type;
    p.shared_memory = whole.shared_memory;
    out.push_back(std::move(p));
  }
}

}  // namespace

std::vector<PlannedPart> plan_request(const SliceLayout& layout, uint32_t tensor, const RequestPlanInputs& in) {
  std::map<uint32_t, std::vector<uint32_t>> by_server;
  for (uint32_t id : layout.slices_of(tensor)) by_server[layout.slice(id).server].push_back(id);
  // float32 both ways (a tensor travels one way, encoded or not): the payloads may go through shared memory.
  const bool float32 = in.type != MessageType::INIT && (!pushes(in.type) || in.push_encoding == Encoding::NONE) &&
                       in.pull_encoding == Encoding::NONE;
  std::vector<PlannedPart> parts;
  for (auto& [server, ids] : by_server) {
    PlannedPart p;
    p.server = server;
    p.role = role_for(in, server);
    p.type = p.role == PartRole::kHostLeader ? MessageType::PUSH_PULL : in.type;
    if (p.role != PartRole::kHostMember)
      p.shared_memory = float32 && in.shared_memory_to && in.shared_memory_to(server);
    for (uint32_t id : ids) {
      switch (p.role) {
        case PartRole::kHostMember: p.routes.push_back(SliceRoute::kToLeader); break;
        case PartRole::kHostLeader: p.routes.push_back(SliceRoute::kHostSum); break;
        case PartRole::kOwn:
          p.routes.push_back(own_route(in, p.shared_memory, layout.slice(id).length * sizeof(float)));
          break;
      }
    }
    p.ids = std::move(ids);
    if (in.stream_of != nullptr && p.role == PartRole::kOwn && !p.shared_memory) {
      split_by_stream(p, *in.stream_of, parts);
    } else {
      parts.push_back(std::move(p));
    }
  }
  return parts;
}

std::vector<uint32_t> assign_streams(const SliceLayout& layout, uint32_t streams) {
  std::vector<uint32_t> stream_of(layout.slices().size(), 0);
  if (streams <= 1) return stream_of;
  std::vector<uint32_t> order(layout.slices().size());
  for (uint32_t id = 0; id < order.size(); ++id) order[id] = id;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return layout.slice(a).length > layout.slice(b).length; });
  std::vector<std::vector<uint64_t>> bytes(layout.num_servers(), std::vector<uint64_t>(streams, 0));
  for (uint32_t id : order) {
    std::vector<uint64_t>& load = bytes[layout.slice(id).server];
    const uint32_t least = static_cast<uint32_t>(std::min_element(load.begin(), load.end()) - load.begin());
    stream_of[id] = least;
    load[least] += layout.slice(id).length * sizeof(float);
  }
  return stream_of;
}

const char* route_name(SliceRoute route) {
  switch (route) {
    case SliceRoute::kNoPayload: return "no-payload";
    case SliceRoute::kTcpCopy: return "tcp-copy";
    case SliceRoute::kTcpBorrowed: return "tcp-borrowed";
    case SliceRoute::kTcpEncoded: return "tcp-encoded";
    case SliceRoute::kShmInline: return "shm-inline";
    case SliceRoute::kShmCopier: return "shm-copier";
    case SliceRoute::kToLeader: return "to-leader";
    case SliceRoute::kHostSum: return "host-sum";
  }
  return "?";
}

}  // namespace pshard
