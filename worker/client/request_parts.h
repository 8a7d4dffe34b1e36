// The pieces a KV client's request is made of, shared by the client (kv_client_impl.h) and its executors (the
// poller, the copier, host aggregation): the user's request (Op), one message to one server (Part), the call that
// builds the parts (Call), and the client's traffic counts.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "common/protocol/codec.h"
#include "worker/client/row_arena.h"

namespace pshard::kv_client_detail {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;

// One user-visible request (a handle): done when every per-server part is done.
struct Op {
  std::mutex mu;
  std::condition_variable cv;
  int remaining = 0;          // per-server parts not yet answered
  int borrowed = 0;           // zero-copy frames ZeroMQ still holds
  int64_t max_step = -1;      // ping: the highest step a pong reported
  int64_t weights_step = -1;  // weights replies: the lowest step the servers' weights were of (-1: none said)
  bool late = false;          // push/pushPull: a server dropped a gradient that came after its step closed
  bool skipped = false;       // weights replies: the step before the read was skipped (loss scaling)
  std::string error;          // first failure
  protocol::ErrorCode error_code = protocol::ErrorCode::NONE;  // its code, when it was a server's error reply

  void part_done(const std::string& failure, protocol::ErrorCode code = protocol::ErrorCode::NONE) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failure.empty() && error.empty()) {
      error = failure;
      error_code = code;
    }
    --remaining;
    cv.notify_all();
  }
};

// One message to one server, and what to do with its reply.
struct Part {
  uint32_t server = 0;
  uint32_t stream = 0;  // which of the connections to `server` carries it (cluster.streams_per_server)
  uint64_t request_id = 0;
  MessageType type = MessageType::INVALID;
  std::string what;  // "pull of fc1.weight (3 slices)"
  std::vector<protocol::KeyRef> keys;
  std::vector<uint32_t> ids;   // global slice id of each key
  bool shared_memory = false;  // payloads and weights through the server's shared memory (ShmLink)
  // zpush through shared memory: gradients still to copy into the push slots (by the copier thread, before it sends
  // the part), as (slice id, source).
  std::vector<std::pair<uint32_t, const float*>> slot_copies;
  std::vector<float*> dests;  // pull/pushPull: where each key's weights go
  // rowPull: row i of the reply goes to row row_positions[i] of row_out (row_dim floats each).
  float* row_out = nullptr;
  std::vector<size_t> row_positions;
  uint32_t row_dim = 0;
  // A row request through shared memory: its values' region of the row segment (the gradients a rowPush wrote
  // there, where a rowPull's rows come back); null over TCP.
  std::shared_ptr<RowRegion> row_region;
  // Host aggregation (HostGroup), the leader's push for its host: each slice's own gradient, to be summed with the
  // members' before the part is sent; the weights of step + 1 that come back are published to the members.
  std::vector<std::pair<uint32_t, const float*>> host_sums;
  std::vector<float> own_copy;  // push(): this part's slices of the caller's gradient, copied (the caller may reuse
                                // its buffer), one after the other
  std::vector<float> scratch;   // a push without a pull: where the weights for the members land
  int64_t publish_version = 0;  // > 0: publish the reply's weights to the host at this version
  std::vector<zmq::message_t> frames;
  std::shared_ptr<Op> op;
  Clock::time_point deadline;
  Clock::time_point sent_at;
  int64_t stall_warnings = 0;  // how many times it was logged as waiting
};

// One call of the client's API (init, push, pull, push_pull, join), as the steps that build its parts see it.
struct Call {
  const std::string& tensor;
  const float* grad;  // the payload: gradient or initial weights (nullptr for a read)
  float* out;         // where the weights go (nullptr for none)
  int64_t step;
  bool copy;  // the caller may reuse `grad` at once
  protocol::Encoding push_encoding, pull_encoding;
  std::shared_ptr<Op> op;
  Clock::time_point deadline;
};

// Payload bytes moved, as KvClient::traffic() reports them (kv_client.h, KvTraffic): through sockets, as float32, and
// through shared memory; counted by whichever thread moves them.
struct TrafficCounts {
  std::atomic<uint64_t> bytes_sent{0}, bytes_recv{0}, fp32_bytes_sent{0}, fp32_bytes_recv{0};
  std::atomic<uint64_t> shm_bytes_sent{0}, shm_bytes_recv{0};
};

}  // namespace pshard::kv_client_detail
