// KvClient: a request's parts built on the calling thread, by the routes plan_request gives them, and handed to the
// executor that sends them (the poller, the copier, host aggregation: kv_client_impl.h).
#include "worker/client/kv_client.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <zmq.hpp>

#include "common/compression/push_encoder.h"
#include "common/config/config.h"
#include "common/config/job_shape.h"
#include "common/error.h"
#include "common/protocol/codec.h"
#include "common/transport/bounds.h"
#include "common/transport/buffer_pool.h"
#include "common/transport/frames.h"
#include "common/util/log.h"
#include "common/util/stream_copy.h"
#include "common/util/tsan.h"
#include "worker/client/host_group.h"
#include "worker/client/kv_client_impl.h"
#include "worker/client/request_plan.h"

namespace pshard {

using protocol::MessageType;
using Clock = std::chrono::steady_clock;
using kv_client_detail::Op;
using kv_client_detail::Part;

namespace {

// On ZeroMQ's I/O thread once the frame is sent (see submit() for the TSan annotation).
void release_borrowed(void*, void* hint) {
  tsan_acquire(hint);
  auto* op = static_cast<std::shared_ptr<Op>*>(hint);
  {
    std::lock_guard<std::mutex> lock((*op)->mu);
    --(*op)->borrowed;
  }
  (*op)->cv.notify_all();
  delete op;
}

}  // namespace

KvClient::Impl::Impl(KvClientOptions o)
    : opt(std::move(o)),
      layout(opt.tensors, opt.slice_bytes, static_cast<uint32_t>(opt.servers.size())),
      encoder(opt.compression, opt.rank, layout.slices().size()),
      links({opt.rank, opt.job_token, opt.servers, opt.transport, &layout}),
      stream_of(assign_streams(layout, opt.streams_per_server)) {
  RequestPoller::Options po;
  po.rank = opt.rank;
  po.servers = opt.servers;
  po.streams_per_server = opt.streams_per_server;
  po.job_token = opt.job_token;
  po.curve = opt.curve;
  po.max_frame_bytes = transport::data_max_frame_bytes(opt.slice_bytes);
  po.request_timeout = opt.request_timeout;
  po.stall_warn = opt.stall_warn;
  poller = std::make_unique<RequestPoller>(
      std::move(po), [this](uint32_t s, Part&& p, protocol::Decoded& d) { on_reply(s, std::move(p), d); });
  copier = std::make_unique<SlotCopier>(SlotCopier::Client{&layout, &links, poller.get()});
  if (opt.host_ranks.size() >= 2) {
    host = std::make_unique<HostAggregation>(
        HostGroup::Options{opt.rank, opt.host_ranks, opt.job_token, &layout, opt.request_timeout},
        HostAggregation::Client{&layout, &links, pool, poller.get(), &counts, opt.rank});
  }
}

KvClient::Impl::~Impl() {
  if (host) host->stop();
  links.abandon();  // a copy waiting for a busy slot gives up
  copier->stop();
  poller.reset();  // fails what is still in flight
}

KvClient::Handle KvClient::Impl::submit(MessageType type, const std::string& tensor, const float* grad, float* out,
                                        size_t numel, int64_t step, bool copy) {
  const uint32_t tid = layout.tensor_id(tensor);
  const TensorSpec& spec = layout.tensors()[tid];
  if (numel != spec.numel) {
    throw Error(std::string(protocol::type_name(type)) + " of '" + tensor + "': " + std::to_string(numel) +
                " elements given, the tensor has " + std::to_string(spec.numel));
  }
  if (step < 0) throw Error(std::string(protocol::type_name(type)) + " of '" + tensor + "': negative step");
  // A whole tensor travels one way: encoded when it is at least compression_min_bytes.
  const uint64_t tensor_bytes = spec.numel * sizeof(float);
  RequestPlanInputs in;
  in.type = type;
  in.copy = copy;
  const bool pushes = type == MessageType::PUSH || type == MessageType::PUSH_PULL;
  // A push that skips its step (request_skip) goes as float32: it is not applied, so no residual may take it in.
  const bool skipping = pushes && step == skip_step.load();
  in.push_encoding = pushes && !skipping ? encoder.push_encoding(tensor_bytes) : protocol::Encoding::NONE;
  in.pull_encoding = encoder.pull_encoding(tensor_bytes);
  if (host) {
    in.host_aggregated = &opt.host_aggregated;
    in.host_leader = host->group().leader();
  }
  in.copier_min_bytes = kCopierMinBytes;
  if (opt.streams_per_server > 1) in.stream_of = &stream_of;
  in.shared_memory_to = [this](uint32_t s) { return links.up(s); };
  if (pushes) keep_residuals_if_checkpointed(step);
  const std::vector<PlannedPart> plan = plan_request(layout, tid, in);

  auto op = std::make_shared<Op>();
  op->remaining = static_cast<int>(plan.size());
  const Call call{
      tensor, grad, out, step, copy, in.push_encoding, in.pull_encoding, op, Clock::now() + opt.request_timeout};
  std::vector<Part> parts;
  std::vector<HostJob> host_parts;  // host aggregation: the leader's sums to make, a member's weights to read
  for (const PlannedPart& planned : plan) {
    if (planned.role == PartRole::kHostMember) {
      Part p = hand_to_leader(planned, call);
      if (type == MessageType::PUSH_PULL) {
        host_parts.push_back({std::move(p), step, {}});
      } else {
        op->part_done("");
      }
      continue;
    }
    protocol::Message header = part_header(planned, call);
    Part p = server_part(planned, call, header);
    if (planned.role == PartRole::kHostLeader) {
      host_parts.push_back({std::move(p), step, std::move(header)});
    } else {
      parts.push_back(std::move(p));
    }
  }
  const Handle h = register_op(op);
  hand_over(parts, host_parts);
  if (pushes) count_push(step);
  return h;
}

KvClient::Impl::Part KvClient::Impl::hand_to_leader(const PlannedPart& planned, const Call& call) {
  Part p;
  p.server = planned.server;
  p.ids = planned.ids;
  p.op = call.op;
  p.deadline = call.deadline;
  p.what = "weights of '" + call.tensor + "' for step " + std::to_string(call.step + 1) + " (" +
           describe_slices(planned.ids) + ") from this host's leader, worker " + std::to_string(group()->leader_rank());
  for (uint32_t id : planned.ids) {
    const SliceInfo& s = layout.slice(id);
    group()->put_gradient(id, call.grad + s.offset, s.length, call.step, call.deadline);
    counts.shm_bytes_sent += s.length * sizeof(float);
    counts.fp32_bytes_sent += s.length * sizeof(float);
    p.keys.push_back({s.tensor, s.slice, s.offset, s.length, protocol::DType::FLOAT32, protocol::Encoding::NONE});
    if (call.out != nullptr) p.dests.push_back(call.out + s.offset);
  }
  return p;
}

protocol::Message KvClient::Impl::part_header(const PlannedPart& planned, const Call& call) {
  const bool pushes = planned.type == MessageType::PUSH || planned.type == MessageType::PUSH_PULL;
  const bool leader = planned.role == PartRole::kHostLeader;
  protocol::Message m;
  m.type = planned.type;
  m.request_id = next_request++;
  m.job_token = opt.job_token;
  m.sender_role = protocol::Role::WORKER;
  m.sender_rank = opt.rank;
  m.step = call.step;
  m.layout_fingerprint = layout.fingerprint();
  m.checkpoint = pushes && call.step == checkpoint_step.load();
  m.stop = pushes && (call.step == stop_step.load() || (leader && call.step == group()->stop_step()));
  m.skipped = pushes && call.step == skip_step.load();
  m.pull_encoding = protocol::reads_weights(planned.type) ? call.pull_encoding : protocol::Encoding::NONE;
  m.shared_memory = planned.shared_memory;
  if (leader) m.contributors = opt.host_ranks;
  if (planned.type == MessageType::INIT) {
    for (const TensorSpec& t : layout.tensors()) m.tensors.push_back({t.name, t.numel});
    m.slice_bytes = layout.slice_bytes();
    m.num_servers = layout.num_servers();
    m.run_total_steps = opt.run_total_steps;
  }
  for (size_t k = 0; k < planned.ids.size(); ++k) {
    const SliceInfo& s = layout.slice(planned.ids[k]);
    const bool encoded = planned.routes[k] == SliceRoute::kTcpEncoded;
    m.keys.push_back({s.tensor, s.slice, s.offset, s.length, protocol::DType::FLOAT32,
                      encoded ? call.push_encoding : protocol::Encoding::NONE});
  }
  return m;
}

KvClient::Impl::Part KvClient::Impl::server_part(const PlannedPart& planned, const Call& call,
                                                 const protocol::Message& header) {
  const bool leader = planned.role == PartRole::kHostLeader;
  Part p;
  p.server = planned.server;
  p.stream = planned.stream;
  p.ids = planned.ids;
  p.shared_memory = planned.shared_memory;
  p.request_id = header.request_id;
  p.type = planned.type;
  p.what = std::string(protocol::type_name(planned.type)) + " of '" + call.tensor + "' step " +
           std::to_string(call.step) + (leader ? " for this host's workers" : "") + " (" +
           describe_slices(planned.ids) + ")";
  p.op = call.op;
  p.deadline = call.deadline;
  p.keys = header.keys;
  if (leader) {
    p.publish_version = call.step + 1;
    size_t n = 0;
    for (uint32_t id : planned.ids) n += layout.slice(id).length;
    if (call.copy) p.own_copy.reserve(n);          // the host sums point into it: no reallocation may move them
    if (call.out == nullptr) p.scratch.resize(n);  // where the weights for the members land
  } else {
    p.frames.push_back(transport::copy_frame(protocol::encode_header(header)));  // the leader's once the sums are in
  }
  size_t scratch_at = 0;
  for (size_t k = 0; k < planned.ids.size(); ++k) {
    const SliceInfo& s = layout.slice(planned.ids[k]);
    if (call.out != nullptr) {
      p.dests.push_back(call.out + s.offset);
    } else if (leader) {
      p.dests.push_back(p.scratch.data() + scratch_at);
      scratch_at += s.length;
    }
    if (planned.routes[k] != SliceRoute::kNoPayload) add_payload(p, planned.routes[k], planned.ids[k], call);
  }
  return p;
}

void KvClient::Impl::add_payload(Part& p, SliceRoute route, uint32_t id, const Call& call) {
  const SliceInfo& s = layout.slice(id);
  const float* values = call.grad + s.offset;
  const size_t bytes = s.length * sizeof(float);
  // Sent bytes are counted here, on the caller's thread, so that a trainer's per-epoch counts hold exactly the
  // requests it made in the epoch (the I/O thread may send the last ones after the epoch's snapshot).
  counts.fp32_bytes_sent += bytes;
  if (route != SliceRoute::kTcpEncoded)
    (p.shared_memory ? counts.shm_bytes_sent : counts.bytes_sent) += bytes;  // encoded: below
  switch (route) {
    case SliceRoute::kHostSum:  // the host thread sums and sends it; a push() copies what the caller may reuse
      if (call.copy) {
        const size_t at = p.own_copy.size();
        p.own_copy.insert(p.own_copy.end(), values, values + s.length);
        values = p.own_copy.data() + at;
      }
      p.host_sums.emplace_back(id, values);
      break;
    case SliceRoute::kShmInline: links.write_push(p.server, id, values, s.length, call.deadline); break;
    case SliceRoute::kShmCopier: p.slot_copies.emplace_back(id, values); break;
    case SliceRoute::kTcpEncoded: {
      zmq::message_t f = pool->message(encoder.max_encoded_bytes(s.length));
      const size_t used = encoder.encode(id, call.step, values, s.length, static_cast<uint8_t*>(f.data()));
      if (used != f.size()) f = zmq::message_t(f.data(), used);
      counts.bytes_sent += f.size();
      p.frames.push_back(std::move(f));
      break;
    }
    case SliceRoute::kTcpCopy: {
      zmq::message_t f = pool->message(bytes);
      std::memcpy(f.data(), values, bytes);
      p.frames.push_back(std::move(f));
      break;
    }
    case SliceRoute::kTcpBorrowed: {
      {
        std::lock_guard<std::mutex> lock(call.op->mu);
        ++call.op->borrowed;
      }
      auto* hint = new std::shared_ptr<Op>(call.op);
      tsan_release(hint);  // libzmq orders this with release_borrowed, out of TSan's sight
      p.frames.emplace_back(const_cast<float*>(values), bytes, &release_borrowed, hint);
      break;
    }
    case SliceRoute::kNoPayload:
    case SliceRoute::kToLeader: break;
  }
}

void KvClient::Impl::hand_over(std::vector<Part>& parts, std::vector<HostJob>& host_parts) {
  if (!host_parts.empty()) host->submit(host_parts);
  const bool copies = std::any_of(parts.begin(), parts.end(), [](const Part& p) { return !p.slot_copies.empty(); });
  if (copies) {  // the copier copies and sends all the parts, in order
    copier->submit(parts);
    return;
  }
  poller->send(parts);
}

std::string KvClient::Impl::describe_slices(const std::vector<uint32_t>& ids) const {
  return ids.size() == 1 ? layout.describe(ids[0]) : std::to_string(ids.size()) + " slices";
}

KvClient::Handle KvClient::Impl::dispatch(const std::shared_ptr<Op>& op, std::vector<Part>& parts) {
  const Handle h = register_op(op);
  poller->send(parts);
  return h;
}

KvClient::Handle KvClient::Impl::register_op(const std::shared_ptr<Op>& op) {
  const Handle h = next_handle++;
  std::lock_guard<std::mutex> lock(ops_mu);
  ops[h] = op;
  return h;
}

KvClient::Handle KvClient::Impl::shutdown_all(MessageType type) {
  auto op = std::make_shared<Op>();
  op->remaining = static_cast<int>(opt.servers.size());
  std::vector<Part> parts;
  for (uint32_t s = 0; s < opt.servers.size(); ++s) {
    Part p;
    p.server = s;
    p.request_id = next_request++;
    p.type = type;
    p.what = protocol::type_name(type);
    p.op = op;
    p.deadline = Clock::now() + opt.request_timeout;
    protocol::Message m;
    m.type = type;
    m.request_id = p.request_id;
    m.job_token = opt.job_token;
    m.sender_role = protocol::Role::WORKER;
    m.sender_rank = opt.rank;
    p.frames.push_back(transport::copy_frame(protocol::encode_header(m)));
    parts.push_back(std::move(p));
  }
  return dispatch(op, parts);
}

namespace {

// cluster.host_aggregation: which of `o`'s servers this worker's host pushes to once for all its workers (whether the
// job aggregates per host at all is its shape's: JobShape::aggregates_per_host). Every worker of the job decides from
// the same config and cluster map, so the workers of a host agree.
void aggregate_per_host(const JobShape& job, const ClusterMap& map, KvClientOptions& o) {
  if (o.rank >= map.workers.size()) return;
  if (!map.workers[o.rank].locality.empty()) {
    std::vector<std::string> localities;
    for (const NodeInfo& w : map.workers) localities.push_back(w.locality);
    o.host = host_ranks(localities, o.rank).front();
  } else {
    o.host = o.rank;
  }
  // `always` with a need is refused when the config is read (check_job_rules); `auto` leaves each worker pushing its
  // own.
  if (!job.aggregates_per_host()) return;
  const std::string& here = map.workers[o.rank].locality;
  if (here.empty()) return;  // a coordinator that does not know localities
  std::vector<std::string> localities;
  for (const NodeInfo& w : map.workers) localities.push_back(w.locality);
  std::vector<uint32_t> ranks = host_ranks(localities, o.rank);
  if (ranks.size() < 2) return;
  o.host_aggregated.assign(map.servers.size(), 0);
  bool any = false;
  for (size_t s = 0; s < map.servers.size(); ++s) {
    o.host_aggregated[s] = job.host_aggregation == "always" || map.servers[s].locality != here;
    any = any || o.host_aggregated[s];
  }
  if (any) o.host_ranks = std::move(ranks);
}

}  // namespace

KvClientOptions KvClientOptions::from_config(const Config& cfg) {
  KvClientOptions o;
  o.slice_bytes = static_cast<uint64_t>(cfg.get_int("cluster.slice_bytes"));
  o.streams_per_server = static_cast<uint32_t>(cfg.get_int("cluster.streams_per_server"));
  o.request_timeout = std::chrono::milliseconds(cfg.get_int("cluster.request_timeout_ms"));
  o.stall_warn = std::chrono::milliseconds(cfg.get_int("cluster.stall_warn_ms"));
  o.compression = compression::Settings::from_config(cfg);
  o.transport = transport::parse_payload_transport(JobShape::from_config(cfg).transport);
  o.checkpoint_every_steps = cfg.get_int("checkpoint.every_steps");
  o.checkpoint_keep = cfg.get_int("checkpoint.keep");
  return o;
}

KvClientOptions KvClientOptions::from_config(const Config& cfg, const ClusterClient& cluster,
                                             const ClusterClient::Options& registered, std::vector<TensorSpec> tensors,
                                             int64_t run_total_steps, const std::string& run_dir) {
  KvClientOptions o = from_config(cfg);
  const JobShape job = JobShape::from_config(cfg);
  if (!run_dir.empty() && job.sync()) o.checkpoint_dir = run_dir + "/checkpoints";
  o.rank = cluster.rank();
  for (const NodeInfo& s : cluster.map().servers) o.servers.push_back(s.endpoint);
  o.tensors = std::move(tensors);
  o.job_token = registered.job_token;
  o.curve = registered.curve;
  o.run_total_steps = run_total_steps;
  aggregate_per_host(job, cluster.map(), o);
  return o;
}

KvClient::KvClient(KvClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->write_residual_files();
}
KvClient::~KvClient() { impl_->flush_residuals(stop_at()); }

const SliceLayout& KvClient::layout() const { return impl_->layout; }

KvClient::Handle KvClient::init(const std::string& tensor, const float* weights, size_t numel) {
  return impl_->submit(MessageType::INIT, tensor, weights, nullptr, numel, 0, true);
}
KvClient::Handle KvClient::push(const std::string& tensor, const float* grad, size_t numel, int64_t step) {
  return impl_->submit(MessageType::PUSH, tensor, grad, nullptr, numel, step, true);
}
KvClient::Handle KvClient::zpush(const std::string& tensor, const float* grad, size_t numel, int64_t step) {
  return impl_->submit(MessageType::PUSH, tensor, grad, nullptr, numel, step, false);
}
KvClient::Handle KvClient::zpull(const std::string& tensor, float* out, size_t numel, int64_t step) {
  return impl_->submit(MessageType::PULL, tensor, nullptr, out, numel, step, false);
}
KvClient::Handle KvClient::pull(const std::string& tensor, std::vector<float>* out, int64_t step) {
  out->resize(impl_->layout.tensors()[impl_->layout.tensor_id(tensor)].numel);
  return impl_->submit(MessageType::PULL, tensor, nullptr, out->data(), out->size(), step, false);
}
KvClient::Handle KvClient::push_pull(const std::string& tensor, const float* grad, float* out, size_t numel,
                                     int64_t step) {
  return impl_->submit(MessageType::PUSH_PULL, tensor, grad, out, numel, step, true);
}
KvClient::Handle KvClient::zpush_pull(const std::string& tensor, const float* grad, float* out, size_t numel,
                                      int64_t step) {
  return impl_->submit(MessageType::PUSH_PULL, tensor, grad, out, numel, step, false);
}
KvClient::Handle KvClient::shutdown_servers() { return impl_->shutdown_all(); }
void KvClient::request_checkpoint(int64_t step) { impl_->checkpoint_step = step; }
void KvClient::request_stop(int64_t step) {
  impl_->stop_step = step;
  HostGroup* group = impl_->group();
  if (group && !group->leader()) group->request_stop(step);  // the leader pushes for it
}
void KvClient::request_skip(int64_t step) {
  if (step >= 0 && impl_->group()) {
    throw Error("worker " + std::to_string(impl_->opt.rank) +
                ": the workers of this host sum their pushes (cluster.host_aggregation), so one of them cannot skip "
                "a step alone");
  }
  impl_->skip_step = step;
}
int64_t KvClient::steps_pushed() const { return impl_->pushed_through.load(std::memory_order_relaxed); }
int64_t KvClient::stop_at() const {
  const int64_t own = impl_->stop_at.load(std::memory_order_acquire);
  HostGroup* group = impl_->group();
  if (!group || group->leader()) return own;
  return std::max(own, group->stop_at());  // a member hears the servers through its leader
}
KvClient::Handle KvClient::join(const std::string& tensor, float* out, size_t numel, int64_t step) {
  return impl_->submit(MessageType::JOIN, tensor, nullptr, out, numel, step, false);
}
int64_t KvClient::servers_step() {
  const Handle h = impl_->shutdown_all(MessageType::PING);
  std::shared_ptr<Op> op;
  {
    std::lock_guard<std::mutex> lock(impl_->ops_mu);
    op = impl_->ops.at(h);
  }
  wait(h);  // throws on a timeout or an error reply
  std::lock_guard<std::mutex> lock(op->mu);
  return op->max_step;
}
KvTraffic KvClient::traffic() const {
  return {impl_->counts.bytes_sent.load(),      impl_->counts.bytes_recv.load(),
          impl_->counts.fp32_bytes_sent.load(), impl_->counts.fp32_bytes_recv.load(),
          impl_->counts.shm_bytes_sent.load(),  impl_->counts.shm_bytes_recv.load()};
}
uint32_t KvClient::host() const { return impl_->opt.host; }
void KvClient::wait(Handle h) { impl_->wait(h, nullptr); }
KvClient::ReplyNotes KvClient::wait_noting(Handle h) {
  ReplyNotes notes;
  impl_->wait(h, nullptr, &notes);
  return notes;
}
bool KvClient::wait_for(Handle h, std::chrono::milliseconds timeout, ReplyNotes* notes) {
  return impl_->wait(h, &timeout, notes);
}

}  // namespace pshard
