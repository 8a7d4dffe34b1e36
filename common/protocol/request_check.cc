// check_request: the server-side rules of docs/PROTOCOL.md "Validation".
#include "common/protocol/request_check.h"

#include <unordered_set>

namespace pshard::protocol {
namespace {

RequestCheck refuse(ErrorCode code, std::string why) {
  RequestCheck c;
  c.code = code;
  c.error = std::move(why);
  return c;
}

}  // namespace

RequestCheck check_request(const Message& msg, const ServerView& view) {
  const MessageType t = msg.type;
  // The tables' requests pass the sender's checks here; the table store checks their tables and rows.
  const bool rows = t == MessageType::TABLE_INIT || t == MessageType::ROW_PULL || t == MessageType::ROW_PUSH;
  const bool data = rows || t == MessageType::INIT || t == MessageType::PUSH || t == MessageType::PULL ||
                    t == MessageType::PUSH_PULL || t == MessageType::JOIN;
  if (!data && t != MessageType::PING && t != MessageType::SHUTDOWN) {
    return refuse(ErrorCode::UNKNOWN_TYPE, std::string("'") + type_name(t) + "' is not a request a server handles");
  }
  if (msg.job_token != view.job_token) return refuse(ErrorCode::BAD_TOKEN, "job token does not match this job");
  RequestCheck ok;
  ok.ok = true;
  if (!data) return ok;

  if (msg.sender_role != Role::WORKER) {
    return refuse(ErrorCode::BAD_SENDER, std::string(type_name(t)) + " must come from a worker");
  }
  if (msg.sender_rank >= view.num_workers) {
    return refuse(ErrorCode::BAD_SENDER, "worker rank " + std::to_string(msg.sender_rank) + " >= number of workers " +
                                             std::to_string(view.num_workers));
  }
  if (t == MessageType::INIT && msg.sender_rank != view.initialiser) {
    return refuse(ErrorCode::BAD_SENDER, "init must come from worker " + std::to_string(view.initialiser) +
                                             ", not worker " + std::to_string(msg.sender_rank));
  }
  if (msg.step < 0) return refuse(ErrorCode::BAD_STEP, "negative step " + std::to_string(msg.step));
  if (rows) return ok;
  if (!msg.contributors.empty()) {
    if (t != MessageType::PUSH && t != MessageType::PUSH_PULL) {
      return refuse(ErrorCode::BAD_SENDER, std::string(type_name(t)) + " cannot name contributors (only a push can)");
    }
    if (msg.contributors[0] != msg.sender_rank) {
      return refuse(ErrorCode::BAD_SENDER, "the first contributor (worker " + std::to_string(msg.contributors[0]) +
                                               ") is not the sender, worker " + std::to_string(msg.sender_rank));
    }
    for (size_t i = 1; i < msg.contributors.size(); ++i) {
      const uint32_t r = msg.contributors[i];
      if (r >= view.num_workers) {
        return refuse(ErrorCode::BAD_SENDER, "contributor worker " + std::to_string(r) + " >= number of workers " +
                                                 std::to_string(view.num_workers));
      }
      if (r <= msg.contributors[i - 1]) {
        return refuse(ErrorCode::BAD_SENDER, "contributors are not in increasing rank order (worker " +
                                                 std::to_string(r) + " after worker " +
                                                 std::to_string(msg.contributors[i - 1]) + ")");
      }
    }
  }
  if (view.layout == nullptr) {
    return refuse(ErrorCode::NOT_INITIALIZED, "no init has told this server the model's tensors yet");
  }
  const SliceLayout& layout = *view.layout;
  if (msg.layout_fingerprint != layout.fingerprint()) {
    return refuse(ErrorCode::LAYOUT_MISMATCH, "layout fingerprint " + std::to_string(msg.layout_fingerprint) +
                                                  " differs from this server's " +
                                                  std::to_string(layout.fingerprint()));
  }
  std::unordered_set<uint32_t> seen;
  ok.slice_ids.reserve(msg.keys.size());
  for (size_t i = 0; i < msg.keys.size(); ++i) {
    const KeyRef& k = msg.keys[i];
    const std::string where = "key " + std::to_string(i) + " (tensor " + std::to_string(k.tensor) + ", slice " +
                              std::to_string(k.slice) + ")";
    const int64_t id = layout.find(k.tensor, k.slice);
    if (id < 0) return refuse(ErrorCode::UNKNOWN_KEY, where + " does not exist in the layout");
    const SliceInfo& s = layout.slice(static_cast<uint32_t>(id));
    const std::string name = layout.describe(static_cast<uint32_t>(id));
    if (s.server != view.server_rank) {
      return refuse(ErrorCode::WRONG_SERVER, name + " belongs to server " + std::to_string(s.server) + ", not " +
                                                 std::to_string(view.server_rank));
    }
    if (k.offset != s.offset || k.length != s.length) {
      return refuse(ErrorCode::WRONG_LENGTH, name + ": offset " + std::to_string(k.offset) + " length " +
                                                 std::to_string(k.length) + ", the slice is offset " +
                                                 std::to_string(s.offset) + " length " + std::to_string(s.length));
    }
    if (!seen.insert(static_cast<uint32_t>(id)).second) {
      return refuse(ErrorCode::DUPLICATE_KEY, name + " appears twice in one request");
    }
    ok.slice_ids.push_back(static_cast<uint32_t>(id));
  }
  return ok;
}

}  // namespace pshard::protocol
