// SliceRequests: init, push, pull, join, dead workers and stalled reads at one slice.
#include "server/kv/slice_requests.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <zmq.hpp>

#include "common/compression/codec.h"
#include "common/metrics/phase_clock.h"
#include "common/metrics/phases.h"
#include "server/kv/shm_host.h"
#include "server/kv/slice_store.h"

namespace pshard {

using protocol::ErrorCode;
using protocol::MessageType;

namespace {

// A push's gradient as float32: the payload itself, or its decoding (decode() checked the encoding).
std::shared_ptr<zmq::message_t> gradient(std::shared_ptr<zmq::message_t> payload, const protocol::KeyRef& k) {
  if (k.encoding == protocol::Encoding::NONE) return payload;
  auto g = std::make_shared<zmq::message_t>(k.length * sizeof(float));
  compression::decode_encoded(k.encoding, payload->data(), payload->size(), k.length, static_cast<float*>(g->data()));
  return g;
}

// Index of the first NaN or infinity in v[0..n), or n. The usual case (none) is one pass over the exponent bits
// that the compiler vectorizes; the index is looked for only when there is one.
size_t first_non_finite(const float* v, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, v + i, sizeof u);
    bad |= static_cast<uint32_t>((u & 0x7f800000u) == 0x7f800000u);  // exponent all ones: NaN or +-inf
  }
  if (bad == 0) return n;
  size_t i = 0;
  while (i < n && std::isfinite(v[i])) ++i;
  return i;
}

}  // namespace

bool SliceRequests::ready(int64_t step, const DeadWorkers& dead) const {
  return slice_.initialized() && slice_.policy->ready(step, dead);
}

// The weights as the reader asked for them, zero-copy: float32, else encoded (cluster.pull_precision) once per
// update of the slice for all its readers; or, for a read in shared memory, published to the weights segment.
void SliceRequests::answer(Request& req, size_t key, int64_t step, ShmHost* shm) {
  req.answered_at(slice_.version());
  if (slice_.policy->skipped_before(step)) req.skipped.store(true, std::memory_order_relaxed);
  if (req.msg.shared_memory) {           // the reply carries no payload: the reader copies the slot
    if (slice_.weights.homed()) return;  // the update wrote it
    shm->publish(req.slice_ids[key], slice_.weights.data(), slice_.weights.size(), slice_.weights.generation());
    return;
  }
  const protocol::Encoding e = req.msg.pull_encoding;
  if (e == protocol::Encoding::NONE) {
    req.replies[key] = slice_.weights.frame();
    return;
  }
  req.replies[key] = slice_.weights.encoded_frame(e);
}

// Answers every waiting read that is now ready.
void SliceRequests::release_waiters(const SliceThread& thread, std::vector<RequestPtr>& finished) {
  if (waiting_.empty()) return;
  std::vector<Waiter> still;
  for (Waiter& w : waiting_) {
    if (ready(w.step, thread.dead)) {
      answer(*w.req, w.key, w.step, thread.shm);
      if (w.req->finish_key()) finished.push_back(std::move(w.req));
    } else {
      still.push_back(std::move(w));
    }
  }
  waiting_.swap(still);
}

// A read at `step`: answered now, or held until the policy lets it through (true: then it finishes when released).
bool SliceRequests::read(const RequestPtr& req, size_t key, int64_t step, const SliceThread& thread) {
  if (ready(step, thread.dead)) {
    answer(*req, key, step, thread.shm);
    return false;
  }
  waiting_.push_back({req, key, step, std::chrono::steady_clock::now()});
  return true;
}

// Key `k` of a push into the policy (true), or refused (false, with the request's error set).
bool SliceRequests::push(const RequestPtr& req, size_t k, const SliceThread& thread,
                         std::vector<RequestPtr>& finished) {
  const protocol::Message& m = req->msg;
  const Contributors from = m.contributors.empty() ? Contributors{m.sender_rank} : m.contributors;
  std::shared_ptr<zmq::message_t> g = gradient(std::move(req->payloads[k]), m.keys[k]);
  // A NaN or an infinity would make the weights NaN for every worker: the push is refused, naming it. Through shared
  // memory the worker looked while it copied the gradient into its slot (pshard's client, in a process of the job's
  // own); an index it names that holds a finite value is not believed.
  // A push that skips its step (loss scaling: its worker's gradients are not finite) is never applied, so it is not
  // looked at.
  const float* gv = static_cast<const float*>(g->data());
  const size_t n = m.keys[k].length;
  size_t bad = k < req->first_non_finite.size() ? req->first_non_finite[k] : 0;
  if (m.skipped) {
    bad = n;
  } else if (k >= req->first_non_finite.size() || bad > n || (bad < n && std::isfinite(gv[bad]))) {
    bad = first_non_finite(gv, n);
  }
  if (bad < n) {
    req->fail(ErrorCode::NON_FINITE_GRADIENT, protocol::sender_name(m) + " pushed a non-finite gradient for " +
                                                  slice_.name() + " at step " + std::to_string(m.step) + " (element " +
                                                  std::to_string(bad) + " is " +
                                                  (std::isnan(gv[bad]) ? "nan"
                                                   : gv[bad] > 0       ? "inf"
                                                                       : "-inf") +
                                                  "): refused, the weights are unchanged");
    return false;
  }
  PushResult pushed = slice_.policy->on_push(from, m.step, StepRequests{m.checkpoint, m.stop, m.skipped}, std::move(g),
                                             thread.dead, thread.scratch);
  if (!pushed.ok()) {
    req->fail(pushed.code, std::move(pushed.why));
    return false;
  }
  if (pushed.dropped) req->late.store(true, std::memory_order_relaxed);
  release_waiters(thread, finished);
  return true;
}

std::vector<RequestPtr> SliceRequests::on_clock(PolicyClock::time_point now, const SliceThread& thread) {
  std::vector<RequestPtr> finished;
  if (!slice_.initialized()) return finished;
  slice_.policy->on_clock(now, thread.dead, thread.scratch);
  release_waiters(thread, finished);
  return finished;
}

std::optional<PolicyClock::time_point> SliceRequests::close_by() const {
  if (!slice_.initialized()) return std::nullopt;
  return slice_.policy->close_by();
}

std::vector<RequestPtr> SliceRequests::run(const RequestPtr& req, size_t k, const SliceThread& thread) {
  ScopedPhase aggregating(ServerPhase::kAggregate);  // the optimizer (Slice::apply) counts as update
  const protocol::Message& m = req->msg;
  // One span per key of a traced request, with the update inside it if it ran.
  RequestSpan span(thread.tracer, TraceName{slice_.trace_names.aggregate}, m, TraceName{slice_.trace_names.slice});
  std::vector<RequestPtr> finished;  // the requests of other readers first, then this one
  bool held = false;                 // this key waits: it finishes when released
  switch (m.type) {
    case MessageType::INIT:
      if (slice_.initialized()) {
        req->fail(ErrorCode::ALREADY_INITIALIZED, slice_.name() + " was already initialised");
        break;
      }
      slice_.init(static_cast<const float*>(req->payloads[k]->data()));
      req->payloads[k].reset();
      release_waiters(thread, finished);
      break;
    case MessageType::PUSH:
    case MessageType::PUSH_PULL:
      if (!slice_.initialized()) {
        req->fail(ErrorCode::NOT_INITIALIZED, slice_.name() + " has not been initialised by worker 0");
        break;
      }
      if (push(req, k, thread, finished) && m.type == MessageType::PUSH_PULL) held = read(req, k, m.step + 1, thread);
      break;
    case MessageType::JOIN: {
      const std::string refused = slice_.policy->on_join(m.sender_rank, m.step);
      if (!refused.empty()) {
        req->fail(ErrorCode::BAD_STEP, "worker " + std::to_string(m.sender_rank) + " cannot join " + slice_.name() +
                                           " at step " + std::to_string(m.step) + ": " + refused);
        break;
      }
      held = read(req, k, m.step, thread);
      break;
    }
    case MessageType::PULL: held = read(req, k, m.step, thread); break;
    default: req->fail(ErrorCode::INTERNAL, "unexpected request type at a slice"); break;
  }
  if (!held && req->finish_key()) finished.push_back(req);
  return finished;
}

std::vector<RequestPtr> SliceRequests::worker_dead(uint32_t rank, const SliceThread& thread) {
  if (slice_.initialized()) slice_.policy->on_worker_dead(rank, thread.dead, thread.scratch);
  std::vector<RequestPtr> finished;
  release_waiters(thread, finished);
  return finished;
}

std::vector<RequestPtr> SliceRequests::check_stalls(StallWatch& watch, StallWatch::Clock::time_point now,
                                                    const DeadWorkers& dead) {
  if (waiting_.empty()) return {};
  return watch.check(slice_, waiting_, now, dead);
}

}  // namespace pshard
