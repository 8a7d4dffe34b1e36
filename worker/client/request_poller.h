// RequestPoller: the KV client's sockets to the servers and whoever polls them. It sends the parts it is given, takes
// the replies (handing each with the part it answers to the client's reply handler), fails the parts past their
// deadline and logs the ones that wait long. The sockets have one user at a time, the poller: a caller that found
// them free (it sends its request itself, and a caller about to block on a request receives the replies itself) or
// else the I/O thread, which takes them over when requests are in flight that no caller is waiting on. Each thread
// hand-off costs a scheduler wake-up (~15-20 us on an idle VM), so a lone request-and-wait goes caller -> socket ->
// caller with no thread of ours in between.
//
//   RequestPoller poller(options, [&](uint32_t server, Part&& part, protocol::Decoded& reply) { ... });
//   poller.send(parts);                       // the caller's thread, or queued for the current poller
//   poller.wait_done(*op, Clock::now() + t);  // polls until the op is done, or blocks while another thread polls
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "common/protocol/codec.h"
#include "common/transport/curve.h"
#include "common/transport/wakeup.h"
#include "worker/client/request_parts.h"

namespace pshard {

class RequestPoller {
 public:
  using Part = kv_client_detail::Part;
  using Op = kv_client_detail::Op;
  using Clock = kv_client_detail::Clock;

  struct Options {
    uint32_t rank = 0;                 // this worker's, for messages
    std::vector<std::string> servers;  // endpoints by server rank: streams_per_server DEALER sockets each
    uint32_t streams_per_server = 1;   // a part goes out on its stream's socket (Part::stream)
    std::string job_token;
    transport::CurveKeys curve;  // cluster.curve: the client's keys and the servers' public key
    size_t max_frame_bytes = 0;  // the largest frame a reply may carry
    std::chrono::milliseconds request_timeout{0};
    std::chrono::milliseconds stall_warn{0};  // log a part waiting this long (0: never)
  };
  // A reply to `part` from server `server`, decoded (the frames stay valid during the call); the handler completes
  // the part's op. Runs on the poller's thread.
  using ReplyHandler = std::function<void(uint32_t server, Part&& part, protocol::Decoded& reply)>;

  // Connects the sockets to each server (an Error names the one that fails) and starts the I/O thread.
  RequestPoller(Options options, ReplyHandler on_reply);
  // Stops the I/O thread: every request still in flight or queued fails ("client stopped"). No caller may be inside
  // send() or wait_done() any more.
  ~RequestPoller();
  RequestPoller(const RequestPoller&) = delete;
  RequestPoller& operator=(const RequestPoller&) = delete;

  // Sends the parts: on this thread when the sockets are free (after any parts queued before, to keep the order), else
  // through the poller's queue.
  void send(std::vector<Part>& parts);
  // Polls until `op` is done or `limit` (taking every reply that arrives, not only its own) when the sockets are free;
  // else blocks until another thread's polling completes `op`, or `limit`. True when `op` is done.
  bool wait_done(Op& op, Clock::time_point limit);
  // A part done off the sockets (a host member's weights): a caller polling for its op looks at it again now.
  void notify() { wake_.notify(); }

  static constexpr std::chrono::milliseconds kScanPeriod{10};  // deadlines and stalls are checked this often

 private:
  enum class Owner { kNone, kCaller, kIoThread };

  std::string server_name(uint32_t s) const { return "server " + std::to_string(s) + " (" + opt_.servers[s] + ")"; }
  // sockets_[server * streams_per_server + stream]
  uint32_t server_of(size_t socket) const { return static_cast<uint32_t>(socket / opt_.streams_per_server); }
  static bool done(Op& op);
  // A caller about to block on `op`: when the sockets are free it polls them itself until `op` is done or `limit`
  // and sets `finished`. Returns false when another thread polls: the caller is then counted as parked (so that a
  // poller letting go calls the I/O thread) and blocks on `op`.
  bool poll_until_done(Op& op, Clock::time_point limit, bool& finished);
  // The poller lets go of the sockets. Requests still in flight wait for the next caller that waits, or for the I/O
  // thread's next look (kScanPeriod); it is called now when someone is blocked on them or parts are queued.
  void release();
  // One turn of the poller: waits up to `timeout` for a reply or queued parts, sends the queued parts, takes every
  // reply that arrived and fails the parts past their deadline. Throws zmq::error_t when polling fails (not EINTR).
  void pump(std::chrono::milliseconds timeout);
  // The I/O thread polls while requests are in flight that no caller waits on (and sends parts queued meanwhile).
  void io_loop();
  // The poller fails every request in flight or queued.
  void fail_everything(const std::string& why);
  bool receive(size_t socket, std::vector<zmq::message_t>& frames);
  void send_queued();
  void send_part(Part& p);
  void take_reply(size_t socket, std::vector<zmq::message_t>& frames);
  // One line per server and period for the requests waiting longer than stall_warn: the oldest named.
  void warn_stalled(Clock::time_point now);
  void expire(Clock::time_point now);

  const Options opt_;
  const ReplyHandler on_reply_;
  zmq::context_t ctx_;                  // one I/O thread per stream to a server, up to 4
  std::vector<zmq::socket_t> sockets_;  // the poller's, by server and stream (server_of)
  transport::Wakeup wake_;              // the poller's: parts were queued for it (or it stops)

  // Ownership of the sockets changes under mu_; the mutex also orders the sockets' use across threads, as ZeroMQ
  // requires.
  std::mutex mu_;
  std::condition_variable io_cv_;      // the I/O thread waits on it for sockets with nobody polling them
  Owner owner_ = Owner::kNone;         // mu_
  std::deque<Part> queue_;             // mu_: parts for the poller to send (submitted while the sockets were busy)
  bool unattended_ = false;            // mu_: requests in flight and nobody polls (set when the poller lets go)
  int parked_ = 0;                     // mu_: callers blocked on a request's completion while another thread polls
  std::atomic<bool> stopping_{false};  // set under mu_

  // The poller's.
  std::unordered_map<uint64_t, Part> inflight_;
  std::vector<zmq::pollitem_t> items_;
  std::vector<zmq::message_t> frames_;
  Clock::time_point next_scan_ = Clock::now();

  std::thread io_;  // last: started once everything above exists
};

}  // namespace pshard
