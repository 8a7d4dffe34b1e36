// RequestPoller (request_poller.h): the sockets, who polls them, sending, receiving, deadlines and stalls.
#include "worker/client/request_poller.h"

#include <algorithm>
#include <map>
#include <utility>

#include "common/error.h"
#include "common/transport/bounds.h"
#include "common/transport/frames.h"
#include "common/transport/peer_auth.h"
#include "common/util/log.h"
#include "common/util/signals.h"

namespace pshard {

RequestPoller::RequestPoller(Options options, ReplyHandler on_reply)
    : opt_(std::move(options)),
      on_reply_(std::move(on_reply)),
      ctx_(static_cast<int>(std::clamp<uint32_t>(opt_.streams_per_server, 1, 4))) {
  if (opt_.streams_per_server < 1) throw Error("RequestPoller: streams_per_server must be >= 1");
  for (size_t i = 0; i < opt_.servers.size() * opt_.streams_per_server; ++i) {
    const size_t s = server_of(i);
    zmq::socket_t sock(ctx_, zmq::socket_type::dealer);
    sock.set(zmq::sockopt::linger, 0);
    sock.set(zmq::sockopt::sndhwm, 0);
    sock.set(zmq::sockopt::rcvhwm, 0);
    transport::bound_client(sock, opt_.max_frame_bytes);
    transport::apply_client_auth(sock, opt_.curve, opt_.job_token);
    try {
      sock.connect(opt_.servers[s]);
    } catch (const zmq::error_t& e) {
      throw Error("worker " + std::to_string(opt_.rank) + ": cannot connect to server " + std::to_string(s) + " at '" +
                  opt_.servers[s] + "': " + e.what());
    }
    sockets_.push_back(std::move(sock));
  }
  io_ = start_thread([this] { io_loop(); });
}

RequestPoller::~RequestPoller() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  io_cv_.notify_all();
  wake_.notify();
  if (io_.joinable()) io_.join();
}

void RequestPoller::send(std::vector<Part>& parts) {
  if (parts.empty()) return;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued = owner_ != Owner::kNone;
    if (queued) {
      for (Part& p : parts) queue_.push_back(std::move(p));
    } else {
      owner_ = Owner::kCaller;
      unattended_ = false;
    }
  }
  if (queued) {
    wake_.notify();
    return;
  }
  send_queued();
  for (Part& p : parts) send_part(p);
  release();
}

bool RequestPoller::wait_done(Op& op, Clock::time_point limit) {
  bool finished = false;
  if (poll_until_done(op, limit, finished)) return finished;
  {  // another thread polls: it completes `op`
    std::unique_lock<std::mutex> lock(op.mu);
    finished = op.cv.wait_until(lock, limit, [&] { return op.remaining == 0; });
  }
  std::lock_guard<std::mutex> lock(mu_);
  --parked_;
  return finished;
}

bool RequestPoller::done(Op& op) {
  std::lock_guard<std::mutex> lock(op.mu);
  return op.remaining == 0;
}

bool RequestPoller::poll_until_done(Op& op, Clock::time_point limit, bool& finished) {
  finished = done(op);
  if (finished) return true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (owner_ != Owner::kNone) {
      ++parked_;
      return false;
    }
    owner_ = Owner::kCaller;
    unattended_ = false;
  }
  struct Release {
    RequestPoller& self;
    ~Release() { self.release(); }
  } release_on_exit{*this};
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(limit - Clock::now());
    pump(std::clamp(left, std::chrono::milliseconds(0), kScanPeriod));
    finished = done(op);
    if (finished || Clock::now() >= limit) return true;
  }
}

void RequestPoller::release() {
  bool call_io = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    owner_ = Owner::kNone;
    unattended_ = !inflight_.empty();
    call_io = !queue_.empty() || (unattended_ && parked_ > 0);
  }
  if (call_io) io_cv_.notify_one();
}

void RequestPoller::pump(std::chrono::milliseconds timeout) {
  items_.resize(sockets_.size() + 1);
  for (size_t s = 0; s < sockets_.size(); ++s) items_[s] = {sockets_[s].handle(), 0, ZMQ_POLLIN, 0};
  items_.back() = {nullptr, wake_.fd(), ZMQ_POLLIN, 0};
  try {
    zmq::poll(items_.data(), items_.size(), timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) throw;
    return;
  }
  if (items_.back().revents & ZMQ_POLLIN) {
    wake_.drain();
    send_queued();
  }
  for (size_t s = 0; s < sockets_.size(); ++s) {
    if (!(items_[s].revents & ZMQ_POLLIN)) continue;
    while (receive(s, frames_)) take_reply(s, frames_);
  }
  const auto now = Clock::now();
  if (now >= next_scan_) {
    expire(now);
    next_scan_ = now + kScanPeriod;
  }
}

void RequestPoller::io_loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      const auto needed = [&] { return owner_ == Owner::kNone && (unattended_ || !queue_.empty()); };
      io_cv_.wait_for(lock, kScanPeriod, [&] { return stopping_ || needed(); });
      if (stopping_) break;
      if (!needed()) continue;
      owner_ = Owner::kIoThread;
      unattended_ = false;
    }
    try {
      do {
        pump(kScanPeriod);
      } while (!stopping_ && !inflight_.empty());
    } catch (const zmq::error_t& e) {
      PSHARD_LOG(kError) << "worker " << opt_.rank << ": poll failed: " << e.what();
      fail_everything(std::string("the I/O thread's poll failed (") + e.what() + ")");  // still the poller
      release();
      return;
    }
    release();
  }
  // No caller is inside a call any more (the client is being destroyed), so nobody else polls.
  fail_everything("client stopped");
}

void RequestPoller::fail_everything(const std::string& why) {
  for (auto& [id, p] : inflight_)
    p.op->part_done("worker " + std::to_string(opt_.rank) + ": " + why + " during " + p.what);
  inflight_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  for (Part& p : queue_) p.op->part_done("worker " + std::to_string(opt_.rank) + ": " + why + " before " + p.what);
  queue_.clear();
}

bool RequestPoller::receive(size_t socket, std::vector<zmq::message_t>& frames) {
  try {
    return transport::recv_frames(sockets_[socket], frames);
  } catch (const zmq::error_t& e) {
    PSHARD_LOG(kWarn) << "worker " << opt_.rank << ": receive from " << server_name(server_of(socket))
                      << " failed: " << e.what();
    return false;
  }
}

void RequestPoller::send_queued() {
  std::deque<Part> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(queue_);
  }
  for (Part& p : batch) send_part(p);
}

void RequestPoller::send_part(Part& p) {
  // Never a blocking send: the DEALER queues messages for a connection that is not up yet, so a send that would
  // block means the socket has no connection left at all. libzmq ends a connection whose security handshake
  // failed (another job's token, a peer that is not a pshard server) without reconnecting, and a blocking send
  // would then wait forever, past every timeout.
  bool sent = false;
  try {
    sent = transport::send_frames(sockets_[p.server * opt_.streams_per_server + p.stream], p.frames,
                                  zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    p.op->part_done("worker " + std::to_string(opt_.rank) + ": sending " + p.what + " to " + server_name(p.server) +
                    " failed: " + e.what());
    return;
  }
  if (!sent) {
    p.op->part_done("worker " + std::to_string(opt_.rank) + ": sending " + p.what + " to " + server_name(p.server) +
                    " failed: no connection to it (its handshake failed: is it a server of this job, with the "
                    "same job token and security settings?)");
    return;
  }
  p.frames.clear();
  p.sent_at = Clock::now();
  const uint64_t id = p.request_id;
  inflight_.emplace(id, std::move(p));
}

void RequestPoller::take_reply(size_t socket, std::vector<zmq::message_t>& frames) {
  const uint32_t s = server_of(socket);
  std::vector<protocol::FrameView> v = transport::views(frames, 0);
  protocol::Decoded d = protocol::decode(v.data(), v.size());
  auto it = inflight_.find(d.message.request_id);
  if (it == inflight_.end() || it->second.server != s) {
    PSHARD_LOG(kDebug) << "worker " << opt_.rank << ": ignoring a reply from " << server_name(s) << " to request "
                       << d.message.request_id << " (late or unknown)";
    return;
  }
  Part p = std::move(it->second);
  inflight_.erase(it);
  on_reply_(s, std::move(p), d);
}

void RequestPoller::warn_stalled(Clock::time_point now) {
  std::map<uint32_t, std::pair<const Part*, int>> by_server;  // server -> (oldest due part, how many are due)
  for (auto& [id, p] : inflight_) {
    if (now - p.sent_at < opt_.stall_warn * (p.stall_warnings + 1)) continue;
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

void RequestPoller::expire(Clock::time_point now) {
  if (opt_.stall_warn.count() > 0) warn_stalled(now);
  for (auto it = inflight_.begin(); it != inflight_.end();) {
    if (it->second.deadline <= now) {
      const Part& p = it->second;
      p.op->part_done("worker " + std::to_string(opt_.rank) + ": timeout after " +
                      std::to_string(opt_.request_timeout.count()) + " ms: " + server_name(p.server) +
                      " did not answer " + p.what + " (request " + std::to_string(p.request_id) + ")");
      it = inflight_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace pshard
