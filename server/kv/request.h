// A request in progress on a server: shared by the socket thread that replies and the threads that run its keys.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/metrics/trace.h"
#include "common/protocol/codec.h"

namespace pshard {
namespace transport {
class SharedSegment;
}

// Payload frames are shared so that BSP can hold an out-of-order contribution without copying it after the request
// has been answered; each is released as soon as its slice has used it (not when the reply goes out), so a server's
// memory holds the pushes not yet applied, not every push whose request is still open.
struct Request {
  zmq::message_t identity;
  std::string address;  // the peer's address (refusal log lines)
  protocol::Message msg;
  std::vector<std::shared_ptr<zmq::message_t>> payloads;
  // A push through shared memory: per key, the index of the first NaN or infinity that the sender found as it copied
  // the gradient into its slot (the key's length: none). Empty: the server looks itself.
  std::vector<uint64_t> first_non_finite;
  std::vector<uint32_t> slice_ids;
  std::vector<zmq::message_t> replies;  // weights: one per key
  // A row request through shared memory: the sender's row segment, held while the request uses it, and for a rowPull
  // where the server writes the rows (ShmHost::row_values).
  std::shared_ptr<transport::SharedSegment> row_segment;
  uint8_t* row_dest = nullptr;
  std::atomic<int> remaining{0};  // keys not finished yet
  std::mutex error_mu;
  protocol::ErrorCode error = protocol::ErrorCode::NONE;
  std::string error_message;
  // A push's gradient for some key came after its step closed, and was dropped (cluster.backup_workers): the reply's
  // `late`.
  std::atomic<bool> late{false};
  // Weights replies: a key's read followed a step that closed skipped (loss scaling), the reply's `skipped`.
  std::atomic<bool> skipped{false};
  // Weights replies: the lowest version among the keys' weights as answered (the reply's weightsStep).
  std::atomic<int64_t> weights_step{std::numeric_limits<int64_t>::max()};

  void answered_at(int64_t version) {
    int64_t seen = weights_step.load(std::memory_order_relaxed);
    while (version < seen && !weights_step.compare_exchange_weak(seen, version, std::memory_order_relaxed)) {
    }
  }

  // The first failure of any key is the reply.
  void fail(protocol::ErrorCode code, std::string why) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (error == protocol::ErrorCode::NONE) {
      error = code;
      error_message = std::move(why);
    }
  }
  // Marks one key finished; true when it was the last (the caller replies).
  bool finish_key() { return remaining.fetch_sub(1, std::memory_order_acq_rel) == 1; }
};
using RequestPtr = std::shared_ptr<Request>;

// A traced span's arguments that say whose request it was.
inline TraceArgs request_trace_args(const protocol::Message& m) {
  return TraceArgs().set("worker", m.sender_rank).set("step", m.step).set("type", protocol::type_name(m.type));
}

// A span of a traced request (trace.steps) named `name`, from its construction to the end of its scope, whichever
// way the scope returns; `slice` adds the slice among its arguments. Costs one test when the step is not traced.
//
//   RequestSpan span(tracer, reply_name, request.msg);
class RequestSpan {
 public:
  RequestSpan(Tracer* tracer, TraceName name, const protocol::Message& m, std::optional<TraceName> slice = {})
      : tracer_(tracer), name_(name), m_(m), slice_(slice) {
    if (tracer_) t0_ = std::chrono::steady_clock::now();
  }
  ~RequestSpan() {
    if (!tracer_ || !tracer_->traces(m_.step)) return;
    TraceArgs args = request_trace_args(m_);
    if (slice_) args.set("slice", *slice_);
    tracer_->span(name_, "server", t0_, std::chrono::steady_clock::now(), args);
  }
  RequestSpan(const RequestSpan&) = delete;
  RequestSpan& operator=(const RequestSpan&) = delete;

 private:
  Tracer* tracer_;
  TraceName name_;
  const protocol::Message& m_;
  std::optional<TraceName> slice_;
  std::chrono::steady_clock::time_point t0_;
};

// "push from worker 3": a request in a refusal's log line.
inline std::string request_what(const protocol::Message& m) {
  return std::string(protocol::type_name(m.type)) + " from worker " + std::to_string(m.sender_rank);
}

// A read of key `key` of `req` that its slice's policy does not let through yet.
struct Waiter {
  RequestPtr req;
  size_t key;
  int64_t step;                                 // the reader's step/clock
  std::chrono::steady_clock::time_point since;  // when it started waiting (stall reports, StallWatch)
};

}  // namespace pshard
