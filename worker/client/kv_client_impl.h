// KvClient::Impl, the worker's KV client inside (kv_client.h): its state and its parts, by the thread that runs them.
// kv_client.cc builds a request's parts on the caller's thread, by the routes plan_request gives them (request_plan.h);
// kv_client_poller.cc is the poller (a waiting caller or the I/O thread: sends, replies, deadlines); kv_client_local.cc
// is what stays on this host (the copier, host aggregation; server_links.h the shared memory with a server on it);
// kv_client_rows.cc the embedding tables' row requests. Only those four files include this one.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "common/compression/push_encoder.h"
#include "common/protocol/codec.h"
#include "common/transport/buffer_pool.h"
#include "common/transport/shm_channel.h"
#include "common/transport/shm_segment.h"
#include "common/transport/wakeup.h"
#include "worker/client/host_group.h"
#include "worker/client/kv_client.h"
#include "worker/client/request_plan.h"
#include "worker/client/server_links.h"

namespace pshard {
namespace kv_client_detail {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;

// One user-visible request (a handle): done when every per-server part is done.
struct Op {
  std::mutex mu;
  std::condition_variable cv;
  int remaining = 0;                                           // per-server parts not yet answered
  int borrowed = 0;                                            // zero-copy frames ZeroMQ still holds
  int64_t max_step = -1;                                       // ping: the highest step a pong reported
  std::string error;                                           // first failure
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

}  // namespace kv_client_detail

struct KvClient::Impl {
  using Clock = kv_client_detail::Clock;
  using Op = kv_client_detail::Op;
  using Part = kv_client_detail::Part;
  using Call = kv_client_detail::Call;
  using MessageType = protocol::MessageType;

  KvClientOptions opt;
  SliceLayout layout;
  std::shared_ptr<transport::BufferPool> pool = transport::BufferPool::create(size_t{1} << 30);
  zmq::context_t ctx{1};
  transport::Wakeup wake;  // the poller's: parts were queued for it (or the client stops)
  std::thread io;
  std::atomic<bool> stopping{false};

  // The sockets have one user at a time, the poller: a caller that found them free (it sends its request itself, and
  // a caller about to block in wait() receives the replies itself) or else the I/O thread, which takes them over when
  // requests are in flight that no caller is waiting on. Each thread hand-off costs a scheduler wake-up (~15-20 us on
  // an idle VM), so a lone request-and-wait goes caller -> socket -> caller with no thread of ours in between.
  // Ownership changes under io_mu; the mutex also orders the sockets' use across threads, as ZeroMQ requires.
  enum class Poller { kNone, kCaller, kIoThread };
  std::mutex io_mu;
  std::condition_variable io_cv;       // the I/O thread waits on it for sockets with nobody polling them
  Poller poller = Poller::kNone;       // io_mu
  std::deque<Part> queue;              // io_mu: parts for the poller to send (submitted while the sockets were busy)
  bool unattended = false;             // io_mu: requests in flight and nobody polls (set when the poller lets go)
  int parked = 0;                      // io_mu: callers blocked on a request's completion while another thread polls
  std::vector<zmq::socket_t> sockets;  // the poller's

  std::mutex ops_mu;
  std::unordered_map<Handle, std::shared_ptr<Op>> ops;
  std::atomic<uint64_t> next_handle{1};
  std::atomic<uint64_t> next_request{1};
  std::atomic<int64_t> checkpoint_step{-1};
  std::atomic<int64_t> stop_step{-1};  // request_stop()
  std::atomic<int64_t> stop_at{0};     // from the servers' replies (stopAt): the step boundary the job stops at
  compression::PushEncoder encoder;
  std::atomic<uint64_t> bytes_sent{0}, bytes_recv{0}, fp32_bytes_sent{0}, fp32_bytes_recv{0};
  std::atomic<uint64_t> shm_bytes_sent{0}, shm_bytes_recv{0};
  ServerLinks links;  // shared memory with the servers on this host

  // zpush's copies of slices up to this size into the push slots are made on the caller's thread.
  static constexpr size_t kCopierMinBytes = 64u << 10;
  // The copier: zpush's copies into the push slots run on this thread, not on the caller's, as the kernel's copy of a
  // TCP payload runs on ZeroMQ's I/O thread: a trainer's backward goes on while its gradients are copied.
  std::mutex copy_mu;
  std::condition_variable copy_cv;
  std::deque<std::pair<std::shared_ptr<Op>, std::vector<Part>>> copy_queue;  // copy_mu
  bool copy_stopping = false;                                                // copy_mu
  std::thread copier;

  // Host aggregation (opt.host_ranks): the host's shared segment, and the thread that waits on it: the leader's sums
  // (its own gradient plus the members', then the push) and a member's reads of the weights the leader publishes.
  // Jobs run in the order they were submitted, which is the order every worker of the host submits them in.
  struct HostJob {
    Part part;
    int64_t step = 0;
    // The leader's push header, encoded once the members' gradients are summed: a member asks to stop at a step
    // (request_stop) before it hands over that step's first gradient, after the leader may have submitted its own.
    protocol::Message header;
  };
  std::unique_ptr<HostGroup> group;
  std::mutex host_mu;
  std::condition_variable host_cv;
  std::deque<HostJob> host_jobs;  // host_mu
  bool host_stopping = false;     // host_mu
  std::thread host_thread;

  explicit Impl(KvClientOptions o);

  ~Impl();

  std::string server_name(uint32_t s) const { return "server " + std::to_string(s) + " (" + opt.servers[s] + ")"; }

  // A tensor's request: its plan (request_plan.h), then each part built by its route and handed to whoever sends it
  // (the caller, the copier or the host thread).
  Handle submit(MessageType type, const std::string& tensor, const float* grad, float* out, size_t numel, int64_t step,
                bool copy);
  // A host member's part: its gradients into the host segment, and what to read back (a push_pull's weights).
  Part hand_to_leader(const PlannedPart& planned, const Call& call);
  // The header of a part this worker sends (for itself or for its host).
  protocol::Message part_header(const PlannedPart& planned, const Call& call);
  // That part: the header's frame (a leader's comes once the sums are in), where the weights go, the payloads.
  Part server_part(const PlannedPart& planned, const Call& call, const protocol::Message& header);
  // One slice's payload by its route: a frame, a push slot, a copy for the copier or a sum for the host thread.
  void add_payload(Part& p, SliceRoute route, uint32_t id, const Call& call);
  // The built parts to the host thread, the copier (when a part has slots to fill) or the sockets.
  void hand_over(const std::shared_ptr<Op>& op, std::vector<Part>& parts, std::vector<HostJob>& host_parts);
  std::string describe_slices(const std::vector<uint32_t>& ids) const;  // "fc1.weight[slice 0]" or "3 slices"

  // Error-feedback residuals at checkpoints (kv_client_residuals.cc): the encoder keeps the states after the pushes
  // of a step the servers checkpoint, and hands them to a file once that step's encodes are done.
  void write_residual_files();
  void keep_residuals_if_checkpointed(int64_t step);
  // A weights reply said the servers checkpoint at `boundary` on another worker's request: this worker's states
  // after step boundary - 1 are those of that checkpoint (before the reply's request is done, so before any encode of
  // step `boundary`).
  void heard_checkpoint(int64_t boundary);
  std::atomic<int64_t> checkpoint_heard{0};
  std::atomic<int64_t> first_pushed{-1};  // the first step this client pushed (a resumed or rejoined worker's start)
  // At the client's end: the kept states to their file; after a stop at boundary `stopped` (> 0) that another worker
  // asked for, this worker's states as they are (its encodes ended at step stopped - 1).
  void flush_residuals(int64_t stopped) noexcept;

  // The host's thread (host aggregation): runs the leader's sums and a member's weight reads in submission order.
  void host_loop();

  // Leader: each slice's gradient summed with the members' (in rank order), then the push for the whole host.
  void send_host_sum(HostJob& job);

  // Member: the weights the leader publishes for step + 1.
  void read_host_weights(HostJob& job);

  void copy_loop();

  // Registers the request's handle and sends its parts: itself when the sockets are free (after any parts queued
  // before, to keep the order), else through the poller's queue.
  Handle dispatch(const std::shared_ptr<Op>& op, std::vector<Part>& parts);

  Handle register_op(const std::shared_ptr<Op>& op);

  void send_parts(std::vector<Part>& parts);

  // The poller lets go of the sockets. Requests still in flight wait for the next caller that waits, or for the I/O
  // thread's next look (kScanPeriod); it is called now when someone is blocked on them or parts are queued.
  void release();

  Handle shutdown_all(MessageType type = MessageType::SHUTDOWN);

  bool wait(Handle h, const std::chrono::milliseconds* timeout);

  static bool done(Op& op);

  // A caller about to block on `op`: when the sockets are free it polls them itself until `op` is done or `limit`
  // (taking every reply that arrives, not only its own) and sets `finished`. Returns false when another thread polls:
  // the caller is then counted as parked (so that a poller letting go calls the I/O thread) and blocks on `op`.
  bool poll_until_done(Op& op, Clock::time_point limit, bool& finished);

  // ---- the poller (a waiting caller or the I/O thread) -----------------------------------------------

  static constexpr std::chrono::milliseconds kScanPeriod{10};  // deadlines and stalls are checked this often

  // The poller's.
  std::unordered_map<uint64_t, Part> inflight;
  std::vector<zmq::pollitem_t> items;
  std::vector<zmq::message_t> frames;
  Clock::time_point next_scan = Clock::now();

  // One turn of the poller: waits up to `timeout` for a reply or queued parts, sends the queued parts, takes every
  // reply that arrived and fails the parts past their deadline. Throws zmq::error_t when polling fails (not EINTR).
  void pump(std::chrono::milliseconds timeout);

  // The I/O thread polls while requests are in flight that no caller waits on (and sends parts queued meanwhile).
  void io_loop();

  // The poller fails every request in flight or queued.
  void fail_everything(const std::string& why);

  bool receive(uint32_t s, std::vector<zmq::message_t>& frames);

  void send_queued();

  void send_part(Part& p);

  // One line per server and period for the requests waiting longer than stall_warn: the oldest named.
  void warn_stalled(Clock::time_point now);

  void expire(Clock::time_point now);

  void on_reply(uint32_t s, std::vector<zmq::message_t>& frames);
  // A rowPull's reply: the rows to where the caller wants them (kv_client_rows.cc); "" or what was wrong.
  std::string take_rows(const Part& p, const protocol::Message& m);

  // The embedding tables (declare_tables) and the encodings of their rows on the wire (bf16 when
  // cluster.compression / cluster.pull_precision say bf16, float32 otherwise).
  std::vector<TableSpec> tables;
  // Parts of a row request: one per server that holds some of `ids` (all servers when `every_server`), each with the
  // positions of its ids in the caller's list.
  std::vector<Part> row_parts(MessageType type, uint32_t table, const uint64_t* ids, size_t n, int64_t step,
                              bool every_server, const std::shared_ptr<Op>& op);

  // Leader: the weights its host's push brought back, for the members.
  void publish_to_host(const Part& p);
};

}  // namespace pshard
