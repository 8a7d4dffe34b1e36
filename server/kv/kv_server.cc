// KvServer: the socket thread (ROUTER, validation, dispatch, replies) over the update threads and the slice store.
#include "server/kv/kv_server.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>
#include <zmq.hpp>

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
#include "common/util/signals.h"
#include "server/kv/request.h"
#include "server/kv/shm_host.h"
#include "server/kv/slice_store.h"
#include "server/kv/step_deadlines.h"
#include "server/kv/update_threads.h"
#include "server/tables/table_store.h"

namespace pshard {

using protocol::ErrorCode;
using protocol::MessageType;

namespace {

constexpr size_t kMaxDeferred = 4096;  // requests held while no init has told us the layout

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
  std::vector<char> io_dead;          // dead workers as the socket thread knows them
  std::vector<char> io_rejoined;      // dead workers that sent a join since (counted per slice from its join step)
  SliceThread inline_thread{io_dead, inline_scratch, nullptr, opt.tracer.get()};  // the socket thread's slices

  std::unique_ptr<UpdateThreads> updates;
  std::unique_ptr<TableStore> tables;  // the embedding tables' rows here, on the socket thread
  std::thread io;

  std::mutex done_mu;  // requests the update threads finished, and control events, for the socket thread
  std::deque<RequestPtr> done;
  std::deque<std::pair<uint32_t, bool>> dead_events;  // (worker rank, whether it left after its last push)

  std::atomic<bool> stopping{false};
  std::mutex shutdown_mu;
  std::condition_variable shutdown_cv;
  bool shutdown_requested = false;
  std::once_flag stop_once;

  std::atomic<uint64_t> n_requests{0}, n_errors{0}, bytes_in{0}, bytes_out{0}, n_dropped{0};
  std::atomic<uint64_t> shm_bytes_in{0}, shm_bytes_out{0};  // payload bytes that went through shared memory
  std::unordered_set<std::string> peers;                    // the socket thread's: routing ids heard from
  std::atomic<uint64_t> n_peers{0};
  PhaseTotals phases{static_cast<size_t>(ServerPhase::kCount)};          // every thread's, from its start to its end
  std::chrono::steady_clock::time_point started;                         // when the threads started
  std::atomic<int64_t> stopped_after_ns{-1};                             // wall time at stop(); -1 while running
  transport::RefusalLog refusals{"server " + std::to_string(opt.rank)};  // the socket thread's

  TraceName receive_name, reply_name;  // kept by opt.tracer

  explicit Impl(KvServerOptions o) : opt(std::move(o)) {
    if (!opt.optimizer) throw Error("server " + std::to_string(opt.rank) + ": no optimizer given");
    if (opt.mode == Consistency::kBsp && opt.backup.count > 0 && opt.backup.count >= opt.num_workers) {
      throw Error("cluster.backup_workers = " + std::to_string(opt.backup.count) +
                  " leaves no worker to wait for: " + "the job has " + std::to_string(opt.num_workers) +
                  " workers; use at most " + std::to_string(opt.num_workers - 1));
    }
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
        shm = std::make_unique<ShmHost>(opt.rank, opt.num_workers, opt.job_token, endpoint, opt.worker_pids);
      } catch (const Error& e) {
        if (opt.transport == transport::PayloadTransport::kShm) throw;
        PSHARD_LOG(kWarn) << e.what() << "; payloads go over TCP";
      }
    }
    tables = std::make_unique<TableStore>(TableStoreOptions{
        opt.rank, opt.num_servers, opt.num_workers, opt.mode, opt.table_optimizer ? opt.table_optimizer : opt.optimizer,
        opt.table_lr > 0 ? opt.table_lr : opt.lr.base_lr, opt.max_rows_per_request});
    io_dead.assign(opt.num_workers, 0);
    io_rejoined.assign(opt.num_workers, 0);
    inline_thread.shm = shm.get();
    if (opt.prepare_store) opt.prepare_store(store, *tables);  // a restored checkpoint, a checkpointer
    if (shm && store.layout()) install_shared_memory();
    started = std::chrono::steady_clock::now();
    // A request the update threads finished goes to the socket thread, which replies.
    auto finished = [this](RequestPtr r) {
      {
        std::lock_guard<std::mutex> lock(done_mu);
        done.push_back(std::move(r));
      }
      wake.notify();
    };
    updates = std::make_unique<UpdateThreads>(
        UpdateThreads::Options{opt.update_threads, opt.rank, opt.num_workers, shm.get(), opt.tracer.get()}, store,
        stalls, phases, started, std::move(finished));
    // An elastic job's ranks that no worker holds yet: dead ones until a worker joins with one (before any request).
    for (uint32_t rank : opt.vacant_workers) handle_dead(rank, /*vacant=*/true);
    io = start_thread([this] { socket_loop(); });
  }

  void stop() {
    std::call_once(stop_once, [this] {
      stopping = true;
      wake.notify();
      if (io.joinable()) io.join();
      if (updates) updates->stop();
      // The threads' clocks ran from `started` to their ends, just before these joins returned.
      stopped_after_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started).count();
      router.close();
    });
  }

  // ---- socket thread ------------------------------------------------------------------------------

  // Is request `m` one of the traced steps? (The cost of tracing off: this test.)
  bool traced(const protocol::Message& m) const { return opt.tracer && opt.tracer->traces(m.step); }

  void socket_loop() {
    Tracer::name_this_thread(opt.tracer.get(), 0, "socket thread (receive, small slices, reply)");
    PhaseClock clock(phases, static_cast<size_t>(ServerPhase::kOther), started);
    std::vector<zmq::message_t> frames;
    while (!stopping) {
      zmq::pollitem_t items[] = {{router.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake.fd(), ZMQ_POLLIN, 0}};
      try {
        ScopedPhase idle(ServerPhase::kIdle);
        zmq::poll(items, 2,
                  inline_deadlines.wait_for(std::chrono::steady_clock::now(), std::chrono::milliseconds(100)));
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
      reply_all(inline_deadlines.close_due(std::chrono::steady_clock::now(), inline_thread));
      drain_done();
      refusals.flush();
      if (stall_tick.due()) {
        const auto now = std::chrono::steady_clock::now();
        store.for_each_owned(-1, [&](Slice& s) { reply_all(s.requests.check_stalls(stalls, now, io_dead)); });
        if (watch_pushes && store.installed() && store.local_slices() > 0) {
          stalls.check_pushes(std::chrono::steady_clock::now(), io_dead);
        }
      }
    }
  }

  StallTick stall_tick;            // the socket thread's
  StepDeadlines inline_deadlines;  // the socket thread's slices' (cluster.backup_workers)

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
    std::deque<std::pair<uint32_t, bool>> dead;
    {
      std::lock_guard<std::mutex> lock(done_mu);
      ready.swap(done);
      dead.swap(dead_events);
    }
    for (const auto& [rank, left] : dead) handle_dead(rank, false, left);
    for (RequestPtr& r : ready) reply(*r);
  }

  void reply_all(const std::vector<RequestPtr>& finished) {
    for (const RequestPtr& r : finished) reply(*r);
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
    RequestSpan span(opt.tracer.get(), reply_name, r.msg);  // the whole reply, whichever way it returns
    {
      std::lock_guard<std::mutex> lock(r.error_mu);
      if (r.error != ErrorCode::NONE) {
        send_error(r.identity, r.address, r.msg.request_id, r.error, r.error_message, request_what(r.msg));
        return;
      }
    }
    protocol::Message m = protocol::reply_header(r.msg, opt.rank);
    if (r.msg.type == MessageType::ROW_PULL) {  // the rows, as the table store encoded them
      m.table = r.msg.table;
      m.row_encoding = r.msg.row_encoding;
      m.shared_memory = r.msg.shared_memory;
      std::vector<zmq::message_t> out;
      out.push_back(std::move(r.identity));
      out.push_back(transport::copy_frame(protocol::encode_header(m)));
      if (m.shared_memory) {  // float32 rows, as many bytes as shared_memory_rows() checked
        if (r.replies.at(0).size() > 0) std::memcpy(r.row_dest, r.replies[0].data(), r.replies[0].size());
        shm_bytes_out += r.replies[0].size();
      } else {
        bytes_out += r.replies.at(0).size();
        out.push_back(std::move(r.replies[0]));
      }
      send(out, r.address);
      return;
    }
    const bool weights = protocol::reads_weights(r.msg.type);
    if (weights) {
      m.stop_at = store.stop_at();
      m.checkpoint_at = store.checkpoint_at();
      const int64_t at = r.weights_step.load(std::memory_order_relaxed);
      if (at != std::numeric_limits<int64_t>::max()) m.weights_step = at;
      m.skipped = r.skipped.load(std::memory_order_relaxed);
    }
    m.late = r.late.load(std::memory_order_relaxed);
    std::vector<zmq::message_t> out;
    out.push_back(std::move(r.identity));
    m.shared_memory = weights && r.msg.shared_memory;
    if (m.shared_memory) {
      m.keys = r.msg.keys;
      for (const protocol::KeyRef& k : m.keys) shm_bytes_out += k.length * sizeof(float);
    } else if (weights) {
      m.keys = r.msg.keys;
      // SliceRequests encoded every key's weights as the request asked (pullEncoding).
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
    if (peers.insert(frames[0].to_string()).second) ++n_peers;
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
    const std::string what = request_what(m);
    // Worker 0 sends the initial weights; when it was declared dead first, the lowest live worker does.
    uint32_t initialiser = 0;
    while (initialiser + 1 < opt.num_workers && io_dead[initialiser] && !io_rejoined[initialiser]) ++initialiser;
    if (m.type == MessageType::INIT && !store.layout()) {
      ErrorCode code = ErrorCode::NONE;
      std::string why;
      if (m.job_token == opt.job_token && m.sender_role == protocol::Role::WORKER && m.sender_rank == initialiser) {
        if (!store.install(m, code, why)) {
          send_error(frames[0], address, m.request_id, code, why, what);
          return;
        }
        if (shm) install_shared_memory();
        held_after_init.swap(deferred);  // requests that came before the layout are served right after this init
      }
    }
    protocol::ServerView view{opt.job_token, opt.rank, opt.num_workers, store.layout(), initialiser};
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
      protocol::Message r = protocol::reply_header(m, opt.rank);
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
    const std::vector<uint32_t> from = m.contributors.empty() ? std::vector<uint32_t>{m.sender_rank} : m.contributors;
    if (m.type != MessageType::INIT && m.type != MessageType::PULL && m.type != MessageType::ROW_PULL &&
        m.type != MessageType::TABLE_INIT) {
      for (uint32_t r : from) {
        if (io_dead[r] && !io_rejoined[r]) {
          send_error(frames[0], address, m.request_id, ErrorCode::WORKER_DEAD,
                     "worker " + std::to_string(r) + " was declared dead", what);
          return;
        }
      }
    }
    if (protocol::is_row_message(m.type)) {
      handle_rows(frames, address, m);
      return;
    }
    if (watch_pushes && (m.type == MessageType::PUSH || m.type == MessageType::PUSH_PULL)) {
      for (uint32_t r : from) stalls.pushed(r, std::chrono::steady_clock::now());
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
                       request_trace_args(req->msg).set("bytes", bytes).set("keys", std::move(keys)));
    }
    for (size_t k = 0; k < req->slice_ids.size(); ++k) {
      const uint32_t id = req->slice_ids[k];
      if (store.owner(id) < 0) {
        reply_all(store.slice(id)->requests.run(req, k, inline_thread));
        inline_deadlines.watch(*store.slice(id));
      } else {
        updates->run(store.owner(id), req, k);
      }
    }
  }

  // tableInit, rowPull and rowPush (their sender checked): the table store runs them here, on the socket thread.
  void handle_rows(std::vector<zmq::message_t>& frames, const std::string& address, protocol::Message& m) {
    if (m.type == MessageType::TABLE_INIT) {
      ErrorCode code = ErrorCode::NONE;
      std::string why;
      if (!tables->declare(m, code, why)) {
        send_error(frames[0], address, m.request_id, code, why, request_what(m));
        return;
      }
      std::vector<zmq::message_t> out;
      out.push_back(std::move(frames[0]));
      out.push_back(transport::copy_frame(protocol::encode_header(protocol::reply_header(m, opt.rank))));
      send(out, address);
      return;
    }
    auto req = std::make_shared<Request>();
    req->identity = std::move(frames[0]);
    req->address = address;
    for (size_t i = 2; i < frames.size(); ++i) {
      bytes_in += frames[i].size();
      req->payloads.push_back(std::make_shared<zmq::message_t>(std::move(frames[i])));
    }
    m.payloads.clear();  // views into moved frames; use req->payloads
    req->msg = std::move(m);
    if (req->msg.shared_memory) {
      std::string why;
      if (!shared_memory_rows(*req, why)) {
        send_error(req->identity, address, req->msg.request_id, ErrorCode::BAD_HEADER, why, request_what(req->msg));
        return;
      }
    }
    reply_all(tables->run(req));
  }

  // A rowPull or rowPush whose float32 values are in the sender's row segment (rowOffset): a push's gradients become
  // its value frame, pointing there (the table store copies them as it checks them); a pull's rows are written there
  // by reply(). A table not declared or not known is left to the table store to refuse. False with `why` when this
  // server has no row segment of the sender's or the values would lie outside it.
  bool shared_memory_rows(Request& req, std::string& why) {
    if (!shm) {
      why = "this server shares no memory with its workers (cluster.transport = tcp, or its channel failed)";
      return false;
    }
    const protocol::Message& m = req.msg;
    if (!tables->declared() || m.table >= tables->size()) return true;
    const uint64_t n = req.payloads.at(0)->size() / sizeof(uint64_t);
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(n, uint64_t{tables->shard(m.table).spec().dim} * sizeof(float), &bytes)) {
      why = std::to_string(n) + " rows of table " + tables->shard(m.table).spec().name + " are too many";
      return false;
    }
    uint8_t* values = nullptr;
    req.row_segment = shm->row_values(m.sender_rank, m.row_offset, bytes, &values, why);
    if (!req.row_segment) return false;
    if (m.type == MessageType::ROW_PUSH) {
      req.payloads.push_back(std::make_shared<zmq::message_t>(
          values, bytes, [](void*, void*) {}, nullptr));
      shm_bytes_in += bytes;
    } else {
      req.row_dest = values;
    }
    return true;
  }

  // The layout is known: the weights segment, and this server's weights kept in it (SliceWeights::home_in), before
  // any thread works on the slices.
  void install_shared_memory() {
    shm->install(*store.layout());
    for (uint32_t id = 0; id < store.size(); ++id) {
      Slice* s = store.slice(id);
      transport::SlotHead* slot = s ? shm->weights_slot(id) : nullptr;
      if (slot) s->weights.home_in(slot);
    }
  }

  // A request whose payloads are in shared memory: a push's payloads become frames that point into the sender's push
  // segment (no copy); a read needs nothing here (SliceRequests publishes the weights). False with `why` when this
  // server shares no memory with the sender.
  bool shared_memory_payloads(Request& req, std::string& why) {
    if (!shm) {
      why = "this server shares no memory with its workers (cluster.transport = tcp, or its channel failed)";
      return false;
    }
    if (req.msg.type != MessageType::PUSH && req.msg.type != MessageType::PUSH_PULL) return true;
    if (!shm->push_payloads(req.msg.sender_rank, req.slice_ids, req.msg.keys, req.payloads, req.first_non_finite,
                            why)) {
      return false;
    }
    for (const auto& p : req.payloads) shm_bytes_in += p->size();
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

  void handle_dead(uint32_t rank, bool vacant = false, bool left = false) {
    if (rank >= opt.num_workers || (io_dead[rank] && !io_rejoined[rank])) return;
    io_dead[rank] = 1;
    io_rejoined[rank] = 0;
    if (shm) shm->forget(rank);
    // A worker that left is logged by the cluster client ("worker 1 (...) left: after 11 pushed steps").
    if (!vacant && !left) {
      PSHARD_LOG(kWarn) << "server " << opt.rank << ": worker " << rank << " is dead; continuing without it";
    }
    updates->worker_dead(rank);
    reply_all(tables->worker_dead(rank));
    store.for_each_owned(-1, [&](Slice& s) {
      reply_all(s.requests.worker_dead(rank, inline_thread));
      inline_deadlines.watch(s);  // one fewer live worker: the quorum of backup workers may be there now
    });
  }
};

KvServer::KvServer(KvServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
KvServer::~KvServer() { stop(); }

const std::string& KvServer::endpoint() const { return impl_->endpoint; }

void KvServer::mark_worker_dead(uint32_t worker_rank) {
  {
    std::lock_guard<std::mutex> lock(impl_->done_mu);
    impl_->dead_events.emplace_back(worker_rank, false);
  }
  impl_->wake.notify();
}

void KvServer::worker_registered(uint32_t worker_rank, int64_t pid) {
  if (impl_->shm) impl_->shm->registered(worker_rank, pid);
}

void KvServer::mark_worker_left(uint32_t worker_rank) {
  {
    std::lock_guard<std::mutex> lock(impl_->done_mu);
    impl_->dead_events.emplace_back(worker_rank, true);
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
  s.connections = impl_->n_peers;
  s.errors = impl_->n_errors;
  s.bytes_received = impl_->bytes_in;
  s.bytes_sent = impl_->bytes_out;
  s.shm_bytes_received = impl_->shm_bytes_in;
  s.shm_bytes_sent = impl_->shm_bytes_out;
  s.updates = impl_->store.updates();
  s.weight_copies = impl_->store.weight_copies();
  s.replies_dropped = impl_->n_dropped;
  const std::vector<double> phases = impl_->phases.seconds();
  std::copy(phases.begin(), phases.end(), s.phases.s.begin());
  s.threads = 1 + impl_->opt.update_threads;
  const int64_t stopped = impl_->stopped_after_ns;
  if (stopped >= 0 && impl_->tables->declared()) s.tables = impl_->tables->stats();  // the socket thread is gone
  s.wall_s = stopped >= 0 ? static_cast<double>(stopped) * 1e-9
                          : std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->started).count();
  return s;
}

Json KvServerStats::phases_json(uint32_t rank) const {
  Json j = Json::object().set("event", "server_phases").set("rank", rank).set("threads", threads).set("wall_s", wall_s);
  phases.set_fields(j);
  if (tables.is_array()) j.set("tables", tables);
  return j;
}

}  // namespace pshard
