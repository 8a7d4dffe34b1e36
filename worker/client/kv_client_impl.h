// KvClient::Impl, the worker's KV client inside (kv_client.h): its state, and its executors, each an object with its
// own thread and state: the poller (request_poller.h: the sockets, sending, replies, deadlines), the copier
// (slot_copier.h: copies into the push slots of a server on this host), host aggregation (host_aggregation.h: a
// leader's sums and pushes, a member's reads) and the shared memory with each server on this host (server_links.h).
// kv_client.cc builds a request's parts on the caller's thread, by the routes plan_request gives them
// (request_plan.h), and hands them to an executor; kv_client_replies.cc takes a reply into the caller's buffers;
// kv_client_rows.cc the embedding tables' row requests. Only those files include this one.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "common/compression/push_encoder.h"
#include "common/protocol/codec.h"
#include "common/transport/buffer_pool.h"
#include "worker/client/host_aggregation.h"
#include "worker/client/kv_client.h"
#include "worker/client/request_parts.h"
#include "worker/client/request_plan.h"
#include "worker/client/request_poller.h"
#include "worker/client/server_links.h"
#include "worker/client/slot_copier.h"

namespace pshard {

struct KvClient::Impl {
  using Clock = kv_client_detail::Clock;
  using Op = kv_client_detail::Op;
  using Part = kv_client_detail::Part;
  using Call = kv_client_detail::Call;
  using MessageType = protocol::MessageType;

  KvClientOptions opt;
  SliceLayout layout;
  std::shared_ptr<transport::BufferPool> pool = transport::BufferPool::create(size_t{1} << 30);

  std::mutex ops_mu;
  std::unordered_map<Handle, std::shared_ptr<Op>> ops;
  std::atomic<uint64_t> next_handle{1};
  std::atomic<uint64_t> next_request{1};
  std::atomic<int64_t> checkpoint_step{-1};
  std::atomic<int64_t> stop_step{-1};  // request_stop()
  std::atomic<int64_t> skip_step{-1};  // request_skip()
  std::atomic<int64_t> stop_at{0};     // from the servers' replies (stopAt): the step boundary the job stops at
  compression::PushEncoder encoder;
  kv_client_detail::TrafficCounts counts;

  // zpush's copies of slices up to this size into the push slots are made on the caller's thread; larger ones on the
  // copier's.
  static constexpr size_t kCopierMinBytes = 64u << 10;

  // The executors. The links outlive the others (their threads write push slots); the poller outlives the copier and
  // host aggregation, which hand it parts; ~Impl stops them in that order.
  ServerLinks links;
  const std::vector<uint32_t> stream_of;  // each slice's connection to its server (cluster.streams_per_server)
  std::unique_ptr<RequestPoller> poller;
  std::unique_ptr<SlotCopier> copier;
  std::unique_ptr<HostAggregation> host;  // host aggregation (opt.host_ranks), else null
  using HostJob = HostAggregation::Job;
  HostGroup* group() const { return host ? &host->group() : nullptr; }

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
  // The built parts to the host thread, the copier (when a part has slots to fill) or the poller.
  void hand_over(std::vector<Part>& parts, std::vector<HostJob>& host_parts);
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
  std::atomic<int64_t> first_pushed{-1};   // the first step this client pushed (a resumed or rejoined worker's start)
  std::atomic<int64_t> pushed_through{0};  // the highest step pushed + 1 (steps_pushed())
  // A push of `step` was handed over: steps_pushed() counts it.
  void count_push(int64_t step) {
    int64_t seen = pushed_through.load(std::memory_order_relaxed);
    while (seen < step + 1 && !pushed_through.compare_exchange_weak(seen, step + 1, std::memory_order_relaxed)) {
    }
  }
  // At the client's end: the kept states to their file; after a stop at boundary `stopped` (> 0) that another worker
  // asked for, this worker's states as they are (its encodes ended at step stopped - 1).
  void flush_residuals(int64_t stopped) noexcept;

  // Registers the request's handle and hands its parts to the poller.
  Handle dispatch(const std::shared_ptr<Op>& op, std::vector<Part>& parts);

  Handle register_op(const std::shared_ptr<Op>& op);

  Handle shutdown_all(MessageType type = MessageType::SHUTDOWN);

  bool wait(Handle h, const std::chrono::milliseconds* timeout, ReplyNotes* notes = nullptr);

  // The poller's reply handler (kv_client_replies.cc): a reply to `p` from server `s`, into the caller's buffers (or
  // the host's), completing p's op.
  void on_reply(uint32_t s, Part&& p, protocol::Decoded& d);
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
