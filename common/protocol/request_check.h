// Semantic checks of a decoded request against a server's job, rank and slice layout (pure; fuzzable).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/keys/slice_layout.h"
#include "common/protocol/codec.h"

namespace pshard::protocol {

// What a server knows when it judges a request.
struct ServerView {
  std::string job_token;
  uint32_t server_rank = 0;
  uint32_t num_workers = 1;
  const SliceLayout* layout = nullptr;  // nullptr until the first init told the server the tensor list
  // The worker whose inits are taken: 0, or the lowest rank still alive once every lower one was declared dead before
  // the initial weights came (failure_policy = continue).
  uint32_t initialiser = 0;
};

struct RequestCheck {
  bool ok = false;
  ErrorCode code = ErrorCode::NONE;
  std::string error;
  std::vector<uint32_t> slice_ids;  // ok: the global slice id of each key, in key order
};

// Checks a message that decode() accepted: it is a request (init, push, pull, pushPull, ping,
// shutdown), the token matches, data requests come from a worker rank < num_workers (init from
// worker 0), the layout fingerprint matches, step >= 0, and every key exists, belongs to this
// server, is not repeated and matches the slice's offset and length. A data request that
// arrives before any layout is known fails with notInitialized.
//
//   Decoded d = decode(frames, n);
//   RequestCheck c = d.ok ? check_request(d.message, view) : RequestCheck{};
RequestCheck check_request(const Message& msg, const ServerView& view);

}  // namespace pshard::protocol
