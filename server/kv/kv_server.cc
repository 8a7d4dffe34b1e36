// KvServer: the socket thread (ROUTER, validation, dispatch, replies) over the update threads and the slice store.
#include "server/kv/kv_server.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/compression/codec.h"
#include "common/config/config.h"
#include "common/error.h"
#include "common/metrics/phase_clock.h"
#include "common/protocol/codec.h"
#include "common/protocol/request_check.h"
#include "common/transport/bounds.h"
#include "common/transport/frames.h"
#include "common/transport/peer_auth.h"
#include "common/transport/refusal_log.h"
#include "common/transport/wakeup.h"
#include "common/util/log.h"
#include "optim/lr_schedule.h"
#include "server/checkpoint/checkpointer.h"
#include "server/consistency/consistency_policy.h"
#include "server/kv/request.h"
#include "server/kv/shm_host.h"
#include "server/kv/slice_store.h"

namespace pshard {

using protocol::ErrorCode;
using protocol::MessageType;

namespace {

// A tenth of the workers' request timeout, at most 5 s: the room the server leaves before it.
std::chrono::milliseconds stall_margin(std::chrono::milliseconds request_timeout) {
  return std::min(request_timeout / 10, std::chrono::milliseconds(5000));
}

}  // namespace

// A worker's request times out request_timeout after it was sent; the server gives a waiting read up one margin
// earlier, so that its `stalled` error (naming the missing workers) arrives first; one more margin earlier, it
// reports those workers stuck, so that the coordinator's verdict comes before either.
std::chrono::milliseconds give_up_before(std::chrono::milliseconds request_timeout) {
  return request_timeout - stall_margin(request_timeout);
}

std::chrono::milliseconds stuck_after(std::chrono::milliseconds request_timeout) {
  return request_timeout - 2 * stall_margin(request_timeout);
}

int KvServerOptions::resolve_io_threads(int io_threads, uint32_t num_workers, unsigned cores) {
  if (io_threads > 0) return io_threads;
  // libzmq's rule of thumb is one I/O thread per GB/s in or out; 8 cover a 64 Gb/s link.
  constexpr uint64_t kMaxAuto = 8;
  return static_cast<int>(std::clamp<uint64_t>(num_workers, 1, std::min<uint64_t>(std::max(cores, 1u), kMaxAuto)));
}

KvServerOptions KvServerOptions::from_config(const Config& cfg) {
  KvServerOptions o;
  o.mode = consistency_from_string(cfg.get_string("cluster.mode"));
  o.staleness = cfg.get_int("cluster.staleness");
  o.slice_bytes = static_cast<uint64_t>(cfg.get_int("cluster.slice_bytes"));
  o.update_threads = static_cast<int>(cfg.get_int("cluster.server_threads"));
  o.io_threads = static_cast<int>(cfg.get_int("cluster.server_io_threads"));
  o.transport = transport::parse_payload_transport(cfg.get_string("cluster.transport"));
  optim::OptimizerParams params = optim::OptimizerParams::from_config(cfg);
  o.optimizer = optim::make_optimizer(params);
  optim::LrScheduleParams sp = optim::LrScheduleParams::from_config(cfg);
  const int64_t batch = cfg.get_int("train.batch_size");
  // The global batch (linear scaling rule) needs W and a cosine schedule the
  // run's length: the schedule is built at the first init, when both are known.
  o.schedule = sp;
  o.base_lr = params.lr;
  o.batch_size = batch;
  o.checkpoint_every_steps = cfg.get_int("checkpoint.every_steps");
  o.checkpoint_keep = cfg.get_int("checkpoint.keep");
  o.stall_warn = std::chrono::milliseconds(cfg.get_int("cluster.stall_warn_ms"));
  const std::chrono::milliseconds request_timeout(cfg.get_int("cluster.request_timeout_ms"));
  o.stall_stuck = stuck_after(request_timeout);
  o.stall_give_up = give_up_before(request_timeout);
  if ((o.checkpoint_every_steps > 0 || cfg.get_double("checkpoint.every_seconds") > 0) && o.mode != Consistency::kBsp) {
    throw Error(
        "checkpoint.every_steps / every_seconds need cluster.mode = sync (checkpoints are taken at step "
        "boundaries)");
  }
  return o;
}

namespace {

thread_local bool on_socket_thread = false;  // true on a KvServer's socket thread

constexpr size_t kMaxDeferred = 4096;  // requests held while no init has told us the layout

struct Task {
  enum Kind { kKey, kWorkerDead, kStop, kTick } kind = kKey;  // kTick: none queued (the queue's wait timed out)
  RequestPtr req;
  size_t key = 0;
  uint32_t rank = 0;
};

// A queue of tasks for one update thread.
struct TaskQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Task> tasks;
  void put(Task t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      tasks.push_back(std::move(t));
    }
    cv.notify_one();
  }
};

}  // namespace

struct KvServer::Impl {
  KvServerOptions opt;
  zmq::context_t ctx{
      KvServerOptions::resolve_io_threads(opt.io_threads, opt.num_workers, std::thread::hardware_concurrency())};
  zmq::socket_t router{ctx, zmq::socket_type::router};
  std::unique_ptr<transport::PeerAuthenticator> auth;  // peers authenticate in the handshake (peer_auth.h)
  std::unique_ptr<ShmHost> shm;  // shared memory with the workers on this host (null: cluster.transport = tcp)
  std::string endpoint;
  transport::Wakeup wake;
  // Installed by the socket thread when the first init arrives, before any task for a slice is queued (the
  // queue's mutex orders it for the update threads).
  SliceStore store{opt, opt.update_threads};
  StallWatch stalls{opt.rank, opt.stall_warn, opt.stall_stuck, opt.stall_give_up, opt.on_stall};
  // Async reads never wait: the watch keeps each worker's last push instead (a server without slices gets none).
  const bool watch_pushes = opt.mode == Consistency::kAsp;
  std::deque<std::vector<zmq::message_t>> deferred;  // requests that came before the first init
  std::deque<std::vector<zmq::message_t>> held_after_init;
  std::vector<float> inline_scratch;  // the socket thread's, for unaligned payloads

  std::vector<std::unique_ptr<TaskQueue>> queues;
  std::vector<std::thread> workers;
  std::thread io;
  std::vector<char> io_dead;      // dead workers as the socket thread knows them
  std::vector<char> io_rejoined;  // dead workers that sent a join since (counted per slice from its join step)

  std::mutex done_mu;  // completions and control events for the socket thread
  std::deque<RequestPtr> done;
  std::deque<uint32_t> dead_events;

  std::atomic<bool> stopping{false};
  std::mutex shutdown_mu;
  std::condition_variable shutdown_cv;
  bool shutdown_requested = false;
  std::once_flag stop_once;

  std::atomic<uint64_t> n_requests{0}, n_errors{0}, bytes_in{0}, bytes_out{0}, n_dropped{0};
  std::atomic<uint64_t> shm_bytes_in{0}, shm_bytes_out{0};       // payload bytes that went through shared memory
  PhaseTotals phases{static_cast<size_t>(ServerPhase::kCount)};  // every thread's, from its start to its end
  std::chrono::steady_clock::time_point started;                 // when the threads started
  std::atomic<int64_t> stopped_after_ns{-1};                     // wall time at stop(); -1 while running
  transport::RefusalLog refusals{"server " + std::to_string(opt.rank)};  // the socket thread's

  // With a run directory. Only BSP closes steps, so only a sync run writes checkpoints (from_config refuses a
  // checkpoint period for the other modes).
  std::unique_ptr<Checkpointer> checkpointer;

  TraceName receive_name, reply_name;  // kept by opt.tracer

  explicit Impl(KvServerOptions o) : opt(std::move(o)) {
    if (!opt.optimizer) throw Error("server " + std::to_string(opt.rank) + ": no optimizer given");
    if (opt.tracer) {
      receive_name = opt.tracer->name("receive");
      reply_name = opt.tracer->name("reply");
    }
    if (opt.num_workers == 0 || opt.num_servers == 0 || opt.rank >= opt.num_servers) {
      throw Error("server: rank " + std::to_string(opt.rank) + " of " + std::to_string(opt.num_servers) +
                  " servers with " + std::to_string(opt.num_workers) + " workers is not a valid job");
    }
    if (opt.update_threads < 0) opt.update_threads = 0;
    transport::bound_router(router, transport::data_max_frame_bytes(opt.slice_bytes));
    router.set(zmq::sockopt::linger, 0);
    auth = std::make_unique<transport::PeerAuthenticator>(ctx, router, opt.curve, opt.job_token,
                                                          "server " + std::to_string(opt.rank));
    std::string bind = opt.bind;
    if (bind.size() > 2 && bind.compare(bind.size() - 2, 2, ":0") == 0) bind = bind.substr(0, bind.size() - 1) + "*";
    try {
      router.bind(bind);
    } catch (const zmq::error_t& e) {
      throw Error("server " + std::to_string(opt.rank) + ": cannot bind " + opt.bind + ": " + e.what());
    }
    endpoint = router.get(zmq::sockopt::last_endpoint);
    if (opt.transport != transport::PayloadTransport::kTcp) {
      try {
        shm = std::make_unique<ShmHost>(opt.rank, opt.num_workers, opt.job_token, endpoint);
      } catch (const Error& e) {
        if (opt.transport == transport::PayloadTransport::kShm) throw;
        PSHARD_LOG(kWarn) << e.what() << "; payloads go over TCP";
      }
    }
    io_dead.assign(opt.num_workers, 0);
    io_rejoined.assign(opt.num_workers, 0);
    for (int i = 0; i < opt.update_threads; ++i) queues.push_back(std::make_unique<TaskQueue>());
    if (!opt.restore_path.empty()) restore_checkpoint(opt.restore_path, opt, store);
    if (shm && store.layout()) shm->install(*store.layout());
    if (!opt.checkpoint_dir.empty()) {
      checkpointer = std::make_unique<Checkpointer>(opt, store);
      store.on_step_closed = [this](const Slice& s, bool asked) { checkpointer->step_closed(s, asked); };
    }
    started = std::chrono::steady_clock::now();
    for (int i = 0; i < opt.update_threads; ++i) workers.emplace_back([this, i] { update_loop(i); });
    io = std::thread([this] { socket_loop(); });
  }

  void stop() {
    std::call_once(stop_once, [this] {
      stopping = true;
      wake.notify();
      if (io.joinable()) io.join();
      for (auto& q : queues) q->put(Task{Task::kStop, nullptr, 0, 0});
      for (auto& t : workers) t.join();
      // The threads' clocks ran from `started` to their ends, just before these joins returned.
      stopped_after_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started).count();
      if (checkpointer) checkpointer->stop();  // after the slices' threads: no snapshot comes any more
      router.close();
    });
  }

  // ---- socket thread ------------------------------------------------------------------------------

  // Is request `m` one of the traced steps? (The cost of tracing off: this test.)
  bool traced(const protocol::Message& m) const { return opt.tracer && opt.tracer->traces(m.step); }

  // The span's arguments that say whose request it was.
  static TraceArgs request_args(const protocol::Message& m) {
    return TraceArgs().set("worker", m.sender_rank).set("step", m.step).set("type", protocol::type_name(m.type));
  }

  void socket_loop() {
    on_socket_thread = true;
    Tracer::name_this_thread(opt.tracer.get(), 0, "socket thread (receive, small slices, reply)");
    PhaseClock clock(phases, static_cast<size_t>(ServerPhase::kOther), started);
    std::vector<zmq::message_t> frames;
    while (!stopping) {
      zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake.fd(), ZMQ_POLLIN, 0}};
      try {
        ScopedPhase idle(ServerPhase::kIdle);
        zmq::poll(items, 2, std::chrono::milliseconds(100));
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        PSHARD_LOG(kError) << "server " << opt.rank << ": poll failed: " << e.what();
        break;
      }
      if (items[1].revents & ZMQ_POLLIN) {
        wake.drain();
        drain_done();
      }
      for (int i = 0; i < 256 && recv(frames); ++i) {
        ScopedPhase receiving(ServerPhase::kRecv);  // the keys run inline are aggregate/update, replies reply
        handle(frames);
        while (!held_after_init.empty()) {
          std::vector<zmq::message_t> held = std::move(held_after_init.front());
          held_after_init.pop_front();
          handle(held);
        }
      }
      drain_done();
      refusals.flush();
      if (stall_tick.due()) {
        for (RequestPtr& r : check_stalls(-1, io_dead)) reply(*r);
        if (watch_pushes && store.installed() && store.local_slices() > 0) {
          stalls.check_pushes(std::chrono::steady_clock::now(), io_dead);
        }
      }
    }
  }

  // Every thread that owns slices looks at their waiting reads this often (StallWatch).
  struct StallTick {
    std::chrono::steady_clock::time_point next = std::chrono::steady_clock::now();
    bool due() {
      const auto now = std::chrono::steady_clock::now();
      if (now < next) return false;
      next = now + std::chrono::milliseconds(100);
      return true;
    }
  };
  StallTick stall_tick;  // the socket thread's

  // The stalls among the slices that thread `owner` (-1: the socket thread) owns; returns the requests finished by
  // reads given up.
  std::vector<RequestPtr> check_stalls(int owner, const std::vector<char>& dead) {
    std::vector<RequestPtr> finished;
    if (!store.installed()) return finished;
    const auto now = std::chrono::steady_clock::now();
    for (uint32_t id = 0; id < store.size(); ++id) {
      Slice* s = store.slice(id);
      if (!s || store.owner(id) != owner || s->waiting.empty()) continue;
      for (RequestPtr& r : stalls.check(*s, now, dead)) finished.push_back(std::move(r));
    }
    return finished;
  }

  bool recv(std::vector<zmq::message_t>& frames) {
    ScopedPhase receiving(ServerPhase::kRecv);
    try {
      return transport::recv_frames(router, frames);
    } catch (const zmq::error_t& e) {
      PSHARD_LOG(kWarn) << "server " << opt.rank << ": receive failed: " << e.what();
      return false;
    }
  }

  void drain_done() {
    std::deque<RequestPtr> ready;
    std::deque<uint32_t> dead;
    {
      std::lock_guard<std::mutex> lock(done_mu);
      ready.swap(done);
      dead.swap(dead_events);
    }
    for (uint32_t rank : dead) handle_dead(rank);
    for (RequestPtr& r : ready) reply(*r);
  }

  // A reply to a peer that does not read it (over its high-water mark) or that left is dropped and counted.
  void send(std::vector<zmq::message_t>& frames, const std::string& address) {
    try {
      const transport::Delivery d = transport::send_to_peer(router, frames);
      if (d != transport::Delivery::kSent) {
        ++n_dropped;
        refusals.add(address, transport::delivery_name(d),
                     "dropped a reply to " + peer(frames[0]) + " at " + address + ": " + transport::delivery_name(d) +
                         " (at most " + std::to_string(transport::kPeerQueueMessages) + " replies wait per peer)");
      }
    } catch (const zmq::error_t& e) {
      refusals.add(address, "send failed", "send failed: " + std::string(e.what()));
    }
  }

  void send_error(zmq::message_t& identity, const std::string& address, uint64_t request_id, ErrorCode code,
                  const std::string& why, const std::string& what) {
    ScopedPhase replying(ServerPhase::kReply);
    ++n_errors;
    refusals.add(address, protocol::error_code_name(code),
                 "refused " + what + " (" + peer(identity) + " at " + address + ", request " +
                     std::to_string(request_id) + "): " + protocol::error_code_name(code) + ": " + why);
    protocol::Message m;
    m.type = MessageType::ERROR;
    m.request_id = request_id;
    m.sender_role = protocol::Role::SERVER;
    m.sender_rank = opt.rank;
    m.error_code = code;
    m.error_message = "server " + std::to_string(opt.rank) + ": " + why;
    std::vector<zmq::message_t> out;
    out.emplace_back(identity.data(), identity.size());
    out.push_back(transport::copy_frame(protocol::encode_header(m)));
    send(out, address);
  }

  void reply(Request& r) {
    ScopedPhase replying(ServerPhase::kReply);
    const auto t0 = opt.tracer ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    struct TraceReply {  // the span covers the whole reply, whichever way it returns
      Impl& self;
      const protocol::Message& m;
      std::chrono::steady_clock::time_point t0;
      ~TraceReply() {
        if (self.traced(m))
          self.opt.tracer->span(self.reply_name, "server", t0, std::chrono::steady_clock::now(), request_args(m));
      }
    } trace_reply{*this, r.msg, t0};
    protocol::Message m;
    m.request_id = r.msg.request_id;
    m.sender_role = protocol::Role::SERVER;
    m.sender_rank = opt.rank;
    {
      std::lock_guard<std::mutex> lock(r.error_mu);
      if (r.error != ErrorCode::NONE) {
        const std::string what =
            std::string(protocol::type_name(r.msg.type)) + " from worker " + std::to_string(r.msg.sender_rank);
        send_error(r.identity, r.address, r.msg.request_id, r.error, r.error_message, what);
        return;
      }
    }
    const bool weights =
        r.msg.type == MessageType::PULL || r.msg.type == MessageType::PUSH_PULL || r.msg.type == MessageType::JOIN;
    m.type = weights ? MessageType::WEIGHTS : MessageType::ACK;
    std::vector<zmq::message_t> out;
    out.push_back(std::move(r.identity));
    m.shared_memory = weights && r.msg.shared_memory;
    if (m.shared_memory) {
      m.keys = r.msg.keys;
      for (const protocol::KeyRef& k : m.keys) shm_bytes_out += k.length * sizeof(float);
    } else if (weights) {
      m.keys = r.msg.keys;
      // answer() encoded every key's weights as the request asked (pullEncoding).
      for (protocol::KeyRef& k : m.keys) k.encoding = r.msg.pull_encoding;
    }
    out.push_back(transport::copy_frame(protocol::encode_header(m)));
    if (weights && !m.shared_memory) {
      for (auto& p : r.replies) {
        bytes_out += p.size();
        out.push_back(std::move(p));
      }
    }
    send(out, r.address);
  }

  void handle(std::vector<zmq::message_t>& frames) {
    const auto received = opt.tracer ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    ++n_requests;
    const std::string address = transport::peer_address(frames.back());
    if (frames.size() < 2) {
      send_error(frames[0], address, 0, ErrorCode::BAD_HEADER, "message has no header frame", "a message");
      return;
    }
    std::vector<protocol::FrameView> v = transport::views(frames, 1);
    protocol::Decoded d = protocol::decode(v.data(), v.size());
    if (!d.ok) {
      send_error(frames[0], address, d.message.request_id, d.code, d.error, "a message");
      return;
    }
    protocol::Message& m = d.message;
    const std::string what = std::string(protocol::type_name(m.type)) + " from worker " + std::to_string(m.sender_rank);
    if (m.type == MessageType::INIT && !store.layout()) {
      ErrorCode code = ErrorCode::NONE;
      std::string why;
      if (m.job_token == opt.job_token && m.sender_role == protocol::Role::WORKER && m.sender_rank == 0) {
        if (!store.install(m, code, why)) {
          send_error(frames[0], address, m.request_id, code, why, what);
          return;
        }
        if (shm) shm->install(*store.layout());
        held_after_init.swap(deferred);  // requests that came before the layout are served right after this init
      }
    }
    protocol::ServerView view{opt.job_token, opt.rank, opt.num_workers, store.layout()};
    protocol::RequestCheck c = protocol::check_request(m, view);
    if (!c.ok) {
      if (c.code == ErrorCode::NOT_INITIALIZED && !store.layout() && m.type != MessageType::INIT) {
        if (deferred.size() < kMaxDeferred) {
          deferred.push_back(std::move(frames));
          frames.clear();
          return;
        }
        c.code = ErrorCode::OVERLOADED;
        c.error = "too many requests are waiting for the first init";
      }
      send_error(frames[0], address, m.request_id, c.code, c.error, what);
      return;
    }
    if (m.type == MessageType::PING || m.type == MessageType::SHUTDOWN) {
      protocol::Message r;
      r.type = m.type == MessageType::PING ? MessageType::PONG : MessageType::ACK;
      r.request_id = m.request_id;
      r.sender_role = protocol::Role::SERVER;
      r.sender_rank = opt.rank;
      r.step = store.max_version();  // where a rejoining worker can start
      std::vector<zmq::message_t> out;
      out.push_back(std::move(frames[0]));
      out.push_back(transport::copy_frame(protocol::encode_header(r)));
      send(out, address);
      if (m.type == MessageType::SHUTDOWN) {
        PSHARD_LOG(kInfo) << "server " << opt.rank << ": shutdown requested";
        std::lock_guard<std::mutex> lock(shutdown_mu);
        shutdown_requested = true;
        shutdown_cv.notify_all();
      }
      return;
    }
    // A rejoining worker's pushes are accepted again; each slice counts it from its join step on.
    if (m.type == MessageType::JOIN) io_rejoined[m.sender_rank] = 1;
    if (m.type != MessageType::INIT && m.type != MessageType::PULL && io_dead[m.sender_rank] &&
        !io_rejoined[m.sender_rank]) {
      send_error(frames[0], address, m.request_id, ErrorCode::WORKER_DEAD,
                 "worker " + std::to_string(m.sender_rank) + " was declared dead", what);
      return;
    }
    if (watch_pushes && (m.type == MessageType::PUSH || m.type == MessageType::PUSH_PULL)) {
      stalls.pushed(m.sender_rank, std::chrono::steady_clock::now());
    }
    auto req = std::make_shared<Request>();
    req->identity = std::move(frames[0]);
    req->address = address;
    req->slice_ids = std::move(c.slice_ids);
    req->payloads.reserve(frames.size() - 2);
    for (size_t i = 2; i < frames.size(); ++i) {
      bytes_in += frames[i].size();
      req->payloads.push_back(std::make_shared<zmq::message_t>(std::move(frames[i])));
    }
    m.payloads.clear();  // views into moved frames; use req->payloads
    req->msg = std::move(m);
    if (req->msg.shared_memory) {
      std::string why;
      if (!shared_memory_payloads(*req, why)) {
        send_error(req->identity, address, req->msg.request_id, ErrorCode::BAD_HEADER, why, what);
        return;
      }
    }
    req->replies.resize(req->msg.keys.size());
    req->remaining = static_cast<int>(req->msg.keys.size());
    if (traced(req->msg)) {
      std::vector<TraceName> keys;
      keys.reserve(req->slice_ids.size());
      uint64_t bytes = 0;
      for (uint32_t id : req->slice_ids) keys.push_back(TraceName{store.slice(id)->trace_names.slice});
      for (const auto& p : req->payloads) bytes += p->size();
      opt.tracer->span(receive_name, "server", received, std::chrono::steady_clock::now(),
                       request_args(req->msg).set("bytes", bytes).set("keys", std::move(keys)));
    }
    bool finished = false;
    for (size_t k = 0; k < req->slice_ids.size(); ++k) {
      const int who = store.owner(req->slice_ids[k]);
      if (who < 0) {
        finished = process_key(req, k, inline_scratch) || finished;
      } else {
        queues[who]->put(Task{Task::kKey, req, k, 0});
      }
    }
    if (finished) reply(*req);
  }

  // A push slot of a worker's segment, held by the payload frame that points into it.
  struct PushSlotHold {
    std::shared_ptr<transport::SharedSegment> segment;
    transport::SlotHead* head;
  };
  // The server has used the gradient: the worker may write the slot again.
  static void release_push_slot(void*, void* hint) {
    auto* hold = static_cast<PushSlotHold*>(hint);
    hold->head->busy.store(0, std::memory_order_release);
    delete hold;
  }

  // A request whose payloads are in shared memory: a push's payloads become frames that point into the sender's push
  // segment (no copy); a read needs nothing here (answer() publishes the weights). False with `why` when this
  // server shares no memory with the sender.
  bool shared_memory_payloads(Request& req, std::string& why) {
    const uint32_t rank = req.msg.sender_rank;
    if (!shm) {
      why = "this server shares no memory with its workers (cluster.transport = tcp, or its channel failed)";
      return false;
    }
    if (req.msg.type != MessageType::PUSH && req.msg.type != MessageType::PUSH_PULL) return true;
    std::shared_ptr<transport::SharedSegment> segment = shm->push_segment(rank);
    if (!segment) {
      why = "worker " + std::to_string(rank) + " has no push segment on this server";
      return false;
    }
    req.payloads.clear();
    for (size_t k = 0; k < req.slice_ids.size(); ++k) {
      transport::SlotHead* head = shm->table().head(segment->data(), req.slice_ids[k]);
      if (head == nullptr) {
        why = "slice " + std::to_string(req.slice_ids[k]) + " has no slot in worker " + std::to_string(rank) +
              "'s push segment";
        req.payloads.clear();
        return false;
      }
      const size_t bytes = req.msg.keys[k].length * sizeof(float);
      shm_bytes_in += bytes;
      req.payloads.push_back(std::make_shared<zmq::message_t>(transport::SlotTable::values(head), bytes,
                                                              &release_push_slot, new PushSlotHold{segment, head}));
    }
    return true;
  }

  static std::string peer(const zmq::message_t& identity) {
    static const char* hex = "0123456789abcdef";
    std::string s = "routing id ";
    const auto* p = static_cast<const unsigned char*>(identity.data());
    for (size_t i = 0; i < identity.size() && i < 8; ++i) {
      s += hex[p[i] >> 4];
      s += hex[p[i] & 15];
    }
    return s;
  }

  void handle_dead(uint32_t rank) {
    if (rank >= opt.num_workers || (io_dead[rank] && !io_rejoined[rank])) return;
    io_dead[rank] = 1;
    io_rejoined[rank] = 0;
    if (shm) shm->forget(rank);
    PSHARD_LOG(kWarn) << "server " << opt.rank << ": worker " << rank << " is dead; continuing without it";
    for (auto& q : queues) q->put(Task{Task::kWorkerDead, nullptr, 0, rank});
    if (!store.layout()) return;
    for (uint32_t id = 0; id < store.size(); ++id) {
      if (store.slice(id) && store.owner(id) < 0) {
        for (RequestPtr& r : worker_dead(*store.slice(id), rank, io_dead, inline_scratch)) reply(*r);
      }
    }
  }

  // ---- slice updates (socket thread for small slices, update threads otherwise) ------------------

  static bool ready(const Slice& s, int64_t step, const std::vector<char>& dead) {
    return s.initialized() && s.policy->ready(step, dead);
  }

  // The weights as the reader asked for them, zero-copy: float32, else encoded (cluster.pull_precision) once per
  // update of the slice for all its readers.
  void answer(Slice& s, Request& req, size_t key) {
    if (req.msg.shared_memory) {  // the reply carries no payload: the reader copies the slot
      shm->publish(req.slice_ids[key], s.weights.data(), s.weights.size(), s.weights.generation());
      return;
    }
    const protocol::Encoding e = req.msg.pull_encoding;
    if (e == protocol::Encoding::NONE) {
      req.replies[key] = s.weights.frame();
      return;
    }
    req.replies[key] = s.weights.encoded_frame(e);
  }

  // A push's gradient as float32: the payload itself, or its decoding (decode() checked the encoding).
  static std::shared_ptr<zmq::message_t> gradient(std::shared_ptr<zmq::message_t> payload, const protocol::KeyRef& k) {
    if (k.encoding == protocol::Encoding::NONE) return payload;
    auto g = std::make_shared<zmq::message_t>(k.length * sizeof(float));
    compression::decode_encoded(k.encoding, payload->data(), payload->size(), k.length, static_cast<float*>(g->data()));
    return g;
  }

  // Index of the first NaN or infinity in v[0..n), or n. The usual case (none) is one pass over the exponent bits
  // that the compiler vectorizes; the index is looked for only when there is one.
  static size_t first_non_finite(const float* v, size_t n) {
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

  // Answers every waiting pull that is now ready; returns the requests that finished.
  std::vector<RequestPtr> release_waiters(Slice& s, const std::vector<char>& dead) {
    std::vector<RequestPtr> finished;
    if (s.waiting.empty()) return finished;
    std::vector<Waiter> still;
    for (Waiter& w : s.waiting) {
      if (ready(s, w.step, dead)) {
        answer(s, *w.req, w.key);
        if (w.req->finish_key()) finished.push_back(std::move(w.req));
      } else {
        still.push_back(std::move(w));
      }
    }
    s.waiting.swap(still);
    return finished;
  }

  std::vector<RequestPtr> worker_dead(Slice& s, uint32_t rank, const std::vector<char>& dead,
                                      std::vector<float>& scratch) {
    if (s.initialized()) s.policy->on_worker_dead(rank, dead, scratch);
    return release_waiters(s, dead);
  }

  // Runs key `k` of `req` on its slice. Returns true when `req` is complete (the caller replies).
  bool process_key(const RequestPtr& req, size_t k, std::vector<float>& scratch,
                   const std::vector<char>* dead_ptr = nullptr) {
    ScopedPhase aggregating(ServerPhase::kAggregate);  // the optimizer (Slice::apply) counts as update
    const std::vector<char>& dead = dead_ptr ? *dead_ptr : io_dead;
    Slice& s = *store.slice(req->slice_ids[k]);
    const protocol::Message& m = req->msg;
    const auto t0 = opt.tracer ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    struct TraceKey {  // one span per slice of a traced request (with the update inside it, if it ran)
      Impl& self;
      const protocol::Message& m;
      const Slice& s;
      std::chrono::steady_clock::time_point t0;
      ~TraceKey() {
        if (self.traced(m)) {
          self.opt.tracer->span(TraceName{s.trace_names.aggregate}, "server", t0, std::chrono::steady_clock::now(),
                                request_args(m).set("slice", TraceName{s.trace_names.slice}));
        }
      }
    } trace_key{*this, m, s, t0};
    const uint32_t rank = m.sender_rank;
    std::vector<RequestPtr> others;
    bool wait = false;
    switch (m.type) {
      case MessageType::INIT: {
        if (s.initialized()) {
          req->fail(ErrorCode::ALREADY_INITIALIZED, s.name() + " was already initialised");
          break;
        }
        s.init(static_cast<const float*>(req->payloads[k]->data()));
        req->payloads[k].reset();
        others = release_waiters(s, dead);
        break;
      }
      case MessageType::PUSH:
      case MessageType::PUSH_PULL: {
        if (!s.initialized()) {
          req->fail(ErrorCode::NOT_INITIALIZED, s.name() + " has not been initialised by worker 0");
          break;
        }
        std::shared_ptr<zmq::message_t> g = gradient(std::move(req->payloads[k]), m.keys[k]);
        // A NaN or an infinity would make the weights NaN for every worker: the push is refused, naming it.
        const float* gv = static_cast<const float*>(g->data());
        const size_t bad = first_non_finite(gv, m.keys[k].length);
        if (bad < m.keys[k].length) {
          req->fail(ErrorCode::NON_FINITE_GRADIENT,
                    "worker " + std::to_string(rank) + " pushed a non-finite gradient for " + s.name() + " at step " +
                        std::to_string(m.step) + " (element " + std::to_string(bad) + " is " +
                        (std::isnan(gv[bad]) ? "nan"
                         : gv[bad] > 0       ? "inf"
                                             : "-inf") +
                        "): refused, the weights are unchanged");
          break;
        }
        PushResult pushed = s.policy->on_push(rank, m.step, m.checkpoint, std::move(g), dead, scratch);
        if (!pushed.ok()) {
          req->fail(pushed.code, std::move(pushed.why));
          break;
        }
        others = release_waiters(s, dead);
        if (m.type == MessageType::PUSH_PULL) {
          if (ready(s, m.step + 1, dead)) {
            answer(s, *req, k);
          } else {
            s.waiting.push_back({req, k, m.step + 1, std::chrono::steady_clock::now()});
            wait = true;
          }
        }
        break;
      }
      case MessageType::JOIN: {
        const std::string refused = s.policy->on_join(rank, m.step);
        if (!refused.empty()) {
          req->fail(ErrorCode::BAD_STEP, "worker " + std::to_string(rank) + " cannot join " + s.name() + " at step " +
                                             std::to_string(m.step) + ": " + refused);
          break;
        }
      }
        [[fallthrough]];
      case MessageType::PULL:
        if (ready(s, m.step, dead)) {
          answer(s, *req, k);
        } else {
          s.waiting.push_back({req, k, m.step, std::chrono::steady_clock::now()});
          wait = true;
        }
        break;
      default: req->fail(ErrorCode::INTERNAL, "unexpected request type on an update thread"); break;
    }
    for (RequestPtr& r : others) complete(r);
    if (wait) return false;
    return req->finish_key();
  }

  // A request finished on some thread: the socket thread sends its reply.
  void complete(RequestPtr& r) {
    if (on_socket_thread) {
      reply(*r);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(done_mu);
      done.push_back(std::move(r));
    }
    wake.notify();
  }

  void update_loop(int index) {
    TaskQueue& q = *queues[index];
    std::vector<char> dead(opt.num_workers, 0);
    std::vector<float> scratch;
    StallTick tick;
    PhaseClock clock(phases, static_cast<size_t>(ServerPhase::kOther), started);
    Tracer::name_this_thread(opt.tracer.get(), index + 1, "update thread " + std::to_string(index));
    for (;;) {
      Task t;
      {
        ScopedPhase idle(ServerPhase::kIdle);
        std::unique_lock<std::mutex> lock(q.mu);
        q.cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return !q.tasks.empty(); });
        if (q.tasks.empty())
          t.kind = Task::kTick;
        else {
          t = std::move(q.tasks.front());
          q.tasks.pop_front();
        }
      }
      if (tick.due()) {
        for (RequestPtr& r : check_stalls(index, dead)) complete(r);
      }
      if (t.kind == Task::kTick) continue;
      if (t.kind == Task::kStop) return;
      try {
        if (t.kind == Task::kWorkerDead) {
          dead[t.rank] = 1;
          if (!store.installed()) continue;
          for (uint32_t id = 0; id < store.size(); ++id) {
            if (store.slice(id) && store.owner(id) == index) {
              for (RequestPtr& r : worker_dead(*store.slice(id), t.rank, dead, scratch)) complete(r);
            }
          }
          continue;
        }
        if (process_key(t.req, t.key, scratch, &dead)) complete(t.req);
      } catch (const std::exception& e) {
        PSHARD_LOG(kError) << "server " << opt.rank << ": update failed: " << e.what();
        if (t.req) {
          t.req->fail(ErrorCode::INTERNAL, e.what());
          if (t.req->finish_key()) complete(t.req);
        }
      }
    }
  }
};

KvServer::KvServer(KvServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
KvServer::~KvServer() { stop(); }

const std::string& KvServer::endpoint() const { return impl_->endpoint; }

void KvServer::mark_worker_dead(uint32_t worker_rank) {
  {
    std::lock_guard<std::mutex> lock(impl_->done_mu);
    impl_->dead_events.push_back(worker_rank);
  }
  impl_->wake.notify();
}

bool KvServer::wait_for_shutdown(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->shutdown_mu);
  return impl_->shutdown_cv.wait_for(lock, timeout, [&] { return impl_->shutdown_requested; });
}

void KvServer::stop() { impl_->stop(); }

int KvServer::io_threads() const { return impl_->ctx.get(zmq::ctxopt::io_threads); }

KvServerStats KvServer::stats() const {
  KvServerStats s;
  s.requests = impl_->n_requests;
  s.errors = impl_->n_errors;
  s.bytes_received = impl_->bytes_in;
  s.bytes_sent = impl_->bytes_out;
  s.shm_bytes_received = impl_->shm_bytes_in;
  s.shm_bytes_sent = impl_->shm_bytes_out;
  s.updates = impl_->store.updates();
  s.weight_copies = impl_->store.weight_copies();
  s.replies_dropped = impl_->n_dropped;
  s.checkpoints = impl_->checkpointer ? impl_->checkpointer->written() : 0;
  s.checkpoints_failed = impl_->checkpointer ? impl_->checkpointer->failed() : 0;
  const std::vector<double> phases = impl_->phases.seconds();
  std::copy(phases.begin(), phases.end(), s.phases.s.begin());
  s.threads = 1 + impl_->opt.update_threads;
  const int64_t stopped = impl_->stopped_after_ns;
  s.wall_s = stopped >= 0 ? static_cast<double>(stopped) * 1e-9
                          : std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->started).count();
  return s;
}

Json KvServerStats::phases_json(uint32_t rank) const {
  Json j = Json::object().set("event", "server_phases").set("rank", rank).set("threads", threads).set("wall_s", wall_s);
  phases.set_fields(j);
  return j;
}

}  // namespace pshard
