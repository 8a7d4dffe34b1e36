// KvClient::Impl's poller (kv_client_impl.h): whoever holds the sockets (a waiting caller or the I/O thread)
// sends the queued parts, takes the replies, publishes what a host's leader received, and fails the parts past their
// deadline.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/protocol/codec.h"
#include "common/transport/frames.h"
#include "common/transport/shm_channel.h"
#include "common/util/log.h"
#include "common/util/stream_copy.h"
#include "common/util/tsan.h"
#include "worker/client/kv_client_impl.h"

namespace pshard {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;

bool KvClient::Impl::wait(Handle h, const std::chrono::milliseconds* timeout) {
  std::shared_ptr<Op> op;
  {
    std::lock_guard<std::mutex> lock(ops_mu);
    auto it = ops.find(h);
    if (it == ops.end()) throw Error("wait: handle " + std::to_string(h) + " is unknown or was already waited for");
    op = it->second;
  }
  // The poller fails every part at its deadline; the extra margin only guards against a bug.
  const auto limit = Clock::now() + (timeout ? *timeout : opt.request_timeout + std::chrono::seconds(10));
  bool finished = false;
  if (!poll_until_done(*op, limit, finished)) {  // another thread polls: it completes `op`
    {
      std::unique_lock<std::mutex> lock(op->mu);
      finished = op->cv.wait_until(lock, limit, [&] { return op->remaining == 0; });
    }
    std::lock_guard<std::mutex> lock(io_mu);
    --parked;
  }
  if (!finished) {
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
  return true;
}

bool KvClient::Impl::done(Op& op) {
  std::lock_guard<std::mutex> lock(op.mu);
  return op.remaining == 0;
}

bool KvClient::Impl::poll_until_done(Op& op, Clock::time_point limit, bool& finished) {
  finished = done(op);
  if (finished) return true;
  {
    std::lock_guard<std::mutex> lock(io_mu);
    if (poller != Poller::kNone) {
      ++parked;
      return false;
    }
    poller = Poller::kCaller;
    unattended = false;
  }
  struct Release {
    Impl& self;
    ~Release() { self.release(); }
  } release_on_exit{*this};
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(limit - Clock::now());
    pump(std::clamp(left, std::chrono::milliseconds(0), kScanPeriod));
    finished = done(op);
    if (finished || Clock::now() >= limit) return true;
  }
}

void KvClient::Impl::pump(std::chrono::milliseconds timeout) {
  items.resize(sockets.size() + 1);
  for (size_t s = 0; s < sockets.size(); ++s) items[s] = {sockets[s].handle(), 0, ZMQ_POLLIN, 0};
  items.back() = {nullptr, wake.fd(), ZMQ_POLLIN, 0};
  try {
    zmq::poll(items.data(), items.size(), timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;
    return;
  }
  if (items.back().revents & ZMQ_POLLIN) {
    wake.drain();
    send_queued();
  }
  for (size_t s = 0; s < sockets.size(); ++s) {
    if (!(items[s].revents & ZMQ_POLLIN)) continue;
    while (receive(static_cast<uint32_t>(s), frames)) on_reply(static_cast<uint32_t>(s), frames);
  }
  const auto now = Clock::now();
  if (now >= next_scan) {
    expire(now);
    next_scan = now + kScanPeriod;
  }
}

void KvClient::Impl::io_loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(io_mu);
      const auto needed = [&] { return poller == Poller::kNone && (unattended || !queue.empty()); };
      io_cv.wait_for(lock, kScanPeriod, [&] { return stopping || needed(); });
      if (stopping) break;
      if (!needed()) continue;
      poller = Poller::kIoThread;
      unattended = false;
    }
    try {
      do {
        pump(kScanPeriod);
      } while (!stopping && !inflight.empty());
    } catch (const zmq::error_t& e) {
      PSHARD_LOG(kError) << "worker " << opt.rank << ": poll failed: " << e.what();
      fail_everything(std::string("the I/O thread's poll failed (") + e.what() + ")");  // still the poller
      release();
      return;
    }
    release();
  }
  // No caller is inside a call any more (the client is being destroyed), so nobody else polls.
  fail_everything("client stopped");
}

void KvClient::Impl::fail_everything(const std::string& why) {
  for (auto& [id, p] : inflight)
    p.op->part_done("worker " + std::to_string(opt.rank) + ": " + why + " during " + p.what);
  inflight.clear();
  std::lock_guard<std::mutex> lock(io_mu);
  for (Part& p : queue) p.op->part_done("worker " + std::to_string(opt.rank) + ": " + why + " before " + p.what);
  queue.clear();
}

bool KvClient::Impl::receive(uint32_t s, std::vector<zmq::message_t>& frames) {
  try {
    return transport::recv_frames(sockets[s], frames);
  } catch (const zmq::error_t& e) {
    PSHARD_LOG(kWarn) << "worker " << opt.rank << ": receive from " << server_name(s) << " failed: " << e.what();
    return false;
  }
}

void KvClient::Impl::send_queued() {
  std::deque<Part> batch;
  {
    std::lock_guard<std::mutex> lock(io_mu);
    batch.swap(queue);
  }
  for (Part& p : batch) send_part(p);
}

void KvClient::Impl::send_part(Part& p) {
  // Never a blocking send: the DEALER queues messages for a connection that is not up yet, so a send that would
  // block means the socket has no connection left at all. libzmq ends a connection whose security handshake
  // failed (another job's token, a peer that is not a pshard server) without reconnecting, and a blocking send
  // would then wait forever, past every timeout.
  bool sent = false;
  try {
    sent = transport::send_frames(sockets[p.server], p.frames, zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    p.op->part_done("worker " + std::to_string(opt.rank) + ": sending " + p.what + " to " + server_name(p.server) +
                    " failed: " + e.what());
    return;
  }
  if (!sent) {
    p.op->part_done("worker " + std::to_string(opt.rank) + ": sending " + p.what + " to " + server_name(p.server) +
                    " failed: no connection to it (its handshake failed: is it a server of this job, with the "
                    "same job token and security settings?)");
    return;
  }
  p.frames.clear();
  p.sent_at = Clock::now();
  const uint64_t id = p.request_id;
  inflight.emplace(id, std::move(p));
}

void KvClient::Impl::warn_stalled(Clock::time_point now) {
  std::map<uint32_t, std::pair<const Part*, int>> by_server;  // server -> (oldest due part, how many are due)
  for (auto& [id, p] : inflight) {
    if (now - p.sent_at < opt.stall_warn * (p.stall_warnings + 1)) continue;
    ++p.stall_warnings;
    auto& [oldest, n] = by_server[p.server];
    if (!oldest || p.sent_at < oldest->sent_at) oldest = &p;
    ++n;
  }
  for (const auto& [server, due] : by_server) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - due.first->sent_at);
    PSHARD_LOG(kWarn) << due.first->what
                      << (due.second > 1 ? " and " + std::to_string(due.second - 1) + " more request(s)" : "")
                      << " waited " << waited.count() << " ms for " << server_name(server)
                      << " (see that server's log for whom it waits)";
  }
}

void KvClient::Impl::expire(Clock::time_point now) {
  if (opt.stall_warn.count() > 0) warn_stalled(now);
  for (auto it = inflight.begin(); it != inflight.end();) {
    if (it->second.deadline <= now) {
      const Part& p = it->second;
      p.op->part_done("worker " + std::to_string(opt.rank) + ": timeout after " +
                      std::to_string(opt.request_timeout.count()) + " ms: " + server_name(p.server) +
                      " did not answer " + p.what + " (request " + std::to_string(p.request_id) + ")");
      it = inflight.erase(it);
    } else {
      ++it;
    }
  }
}

void KvClient::Impl::on_reply(uint32_t s, std::vector<zmq::message_t>& frames) {
  std::vector<protocol::FrameView> v = transport::views(frames, 0);
  protocol::Decoded d = protocol::decode(v.data(), v.size());
  auto it = inflight.find(d.message.request_id);
  if (it == inflight.end() || it->second.server != s) {
    PSHARD_LOG(kDebug) << "worker " << opt.rank << ": ignoring a reply from " << server_name(s) << " to request "
                       << d.message.request_id << " (late or unknown)";
    return;
  }
  Part p = std::move(it->second);
  inflight.erase(it);
  links.heard_from(s);
  const std::string who = "worker " + std::to_string(opt.rank) + ": " + server_name(s);
  if (!d.ok) {
    p.op->part_done(who + " sent a malformed reply to " + p.what + ": " + d.error);
    return;
  }
  const protocol::Message& m = d.message;
  // Before the request is done, so that whoever waited for it sees the stop (stop_at()).
  if (m.stop_at > 0) {
    stop_at.store(m.stop_at, std::memory_order_release);
    if (p.publish_version > 0) group->set_stop_at(m.stop_at);  // before the members see the weights
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
        shm_bytes_recv += p.keys[k].length * sizeof(float);
        fp32_bytes_recv += p.keys[k].length * sizeof(float);
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
      bytes_recv += f.size;
      fp32_bytes_recv += p.keys[k].length * sizeof(float);
    }
    publish_to_host(p);
  }
  p.op->part_done("");
}

}  // namespace pshard
