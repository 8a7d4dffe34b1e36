// KvClient::Impl's replies (kv_client_impl.h): the poller hands each reply here with the part it answers; its
// weights go to the caller's buffers (and, for a host's leader, to the host), and the caller's wait ends.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common/compression/codec.h"
#include "common/error.h"
#include "common/protocol/codec.h"
#include "common/util/log.h"
#include "worker/client/kv_client_impl.h"

namespace pshard {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;

bool KvClient::Impl::wait(Handle h, const std::chrono::milliseconds* timeout, ReplyNotes* notes) {
  std::shared_ptr<Op> op;
  {
    std::lock_guard<std::mutex> lock(ops_mu);
    auto it = ops.find(h);
    if (it == ops.end()) throw Error("wait: handle " + std::to_string(h) + " is unknown or was already waited for");
    op = it->second;
  }
  // The poller fails every part at its deadline; the extra margin only guards against a bug.
  const auto limit = Clock::now() + (timeout ? *timeout : opt.request_timeout + std::chrono::seconds(10));
  if (!poller->wait_done(*op, limit)) {
    if (timeout) return false;
    throw Error("worker " + std::to_string(opt.rank) + ": request " + std::to_string(h) + " got no completion");
  }
  {
    std::lock_guard<std::mutex> ops_lock(ops_mu);
    ops.erase(h);
  }
  std::unique_lock<std::mutex> lock(op->mu);
  // ZeroMQ drops its reference to a zero-copy frame right after sending it; wait for that so
  // the caller may free the buffer (bounded: after a timeout the frame may sit in a dead queue).
  op->cv.wait_for(lock, std::chrono::seconds(1), [&] { return op->borrowed == 0; });
  if (!op->error.empty()) {
    if (op->error_code != protocol::ErrorCode::NONE) throw KvError(op->error, op->error_code);
    throw Error(op->error);
  }
  if (notes) *notes = ReplyNotes{op->weights_step, op->late, op->skipped};
  return true;
}

void KvClient::Impl::on_reply(uint32_t s, Part&& p, protocol::Decoded& d) {
  links.heard_from(s);
  if (p.row_region) p.row_region->answered = true;  // the server is done with it: freed with the part
  const std::string who = "worker " + std::to_string(opt.rank) + ": " + server_name(s);
  if (!d.ok) {
    p.op->part_done(who + " sent a malformed reply to " + p.what + ": " + d.error);
    return;
  }
  const protocol::Message& m = d.message;
  // Before the request is done, so that whoever waited for it sees the stop (stop_at()).
  if (m.stop_at > 0) {
    stop_at.store(m.stop_at, std::memory_order_release);
    if (p.publish_version > 0) group()->set_stop_at(m.stop_at);  // before the members see the weights
  }
  if (m.checkpoint_at > 0) heard_checkpoint(m.checkpoint_at);
  if (m.type == MessageType::ERROR) {
    p.op->part_done(
        who + " refused " + p.what + ": " + protocol::error_code_name(m.error_code) + ": " + m.error_message,
        m.error_code);
    return;
  }
  const bool wants_weights = protocol::reads_weights(p.type);
  if (m.type != protocol::reply_type(p.type)) {
    p.op->part_done(who + " answered " + p.what + " with '" + protocol::type_name(m.type) + "'");
    return;
  }
  if (p.type == MessageType::ROW_PULL) {
    p.op->part_done(take_rows(p, m));
    return;
  }
  if (p.type == MessageType::PING) {
    std::lock_guard<std::mutex> lock(p.op->mu);
    p.op->max_step = std::max(p.op->max_step, m.step);
  }
  if (m.late || (wants_weights && (m.weights_step > 0 || m.skipped))) {
    std::lock_guard<std::mutex> lock(p.op->mu);
    p.op->late = p.op->late || m.late;
    p.op->skipped = p.op->skipped || (wants_weights && m.skipped);
    if (wants_weights && (p.op->weights_step < 0 || m.weights_step < p.op->weights_step)) {
      p.op->weights_step = m.weights_step;
    }
  }
  if (wants_weights) {
    if (m.keys.size() != p.keys.size()) {
      p.op->part_done(who + " answered " + p.what + " with " + std::to_string(m.keys.size()) + " keys, expected " +
                      std::to_string(p.keys.size()));
      return;
    }
    for (size_t k = 0; k < p.keys.size(); ++k) {
      if (m.keys[k].tensor != p.keys[k].tensor || m.keys[k].slice != p.keys[k].slice ||
          m.keys[k].length != p.keys[k].length) {
        p.op->part_done(who + " answered " + p.what + " with the wrong key at position " + std::to_string(k));
        return;
      }
    }
    if (m.shared_memory != p.shared_memory) {
      p.op->part_done(who + " answered " + p.what + (m.shared_memory ? " through" : " not through") + " shared memory");
      return;
    }
    if (m.shared_memory) {
      for (size_t k = 0; k < p.keys.size(); ++k) {
        if (!links.read_weights(s, p.ids[k], p.dests[k], p.keys[k].length)) {
          p.op->part_done(who + ": the weights of " + layout.describe(p.ids[k]) +
                          " changed during every read of its shared-memory slot");
          return;
        }
        counts.shm_bytes_recv += p.keys[k].length * sizeof(float);
        counts.fp32_bytes_recv += p.keys[k].length * sizeof(float);
      }
      publish_to_host(p);
      p.op->part_done("");
      return;
    }
    // decode() checked each payload against its key's length and encoding.
    for (size_t k = 0; k < p.keys.size(); ++k) {
      const protocol::FrameView& f = m.payloads[k];
      if (m.keys[k].encoding == protocol::Encoding::NONE) {
        std::memcpy(p.dests[k], f.data, f.size);
      } else {
        compression::decode_encoded(m.keys[k].encoding, f.data, f.size, p.keys[k].length, p.dests[k]);
      }
      counts.bytes_recv += f.size;
      counts.fp32_bytes_recv += p.keys[k].length * sizeof(float);
    }
    publish_to_host(p);
  }
  p.op->part_done("");
}

void KvClient::Impl::publish_to_host(const Part& p) {
  if (p.publish_version == 0) return;
  for (size_t k = 0; k < p.keys.size(); ++k) {
    group()->publish(p.ids[k], p.dests[k], p.keys[k].length, p.publish_version);
    counts.shm_bytes_sent += p.keys[k].length * sizeof(float);
  }
}

}  // namespace pshard
