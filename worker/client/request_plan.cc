// plan_request: a KV request's parts and each slice's route, from the layout and what the client knows
// (request_plan.h).
#include "worker/client/request_plan.h"

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
    parts.push_back(std::move(p));
  }
  return parts;
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
