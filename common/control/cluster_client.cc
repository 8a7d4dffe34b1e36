// ClusterClient: one background thread owns the DEALER socket to the coordinator;
// callers talk to it through a locked command queue and an eventfd wake-up.
#include "common/control/cluster_client.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "common/config/config.h"
#include "common/control/cluster_commands.h"
#include "common/control/control_codec.h"
#include "common/error.h"
#include "common/transport/bounds.h"
#include "common/transport/peer_auth.h"
#include "common/util/env.h"
#include "common/util/host.h"
#include "common/util/log.h"
#include "common/util/signals.h"

namespace pshard {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
namespace cc = control_codec;

}  // namespace

struct ClusterClient::Impl {
  using Command = cluster_client_detail::Command;

  Options opt;
  std::string self;  // "worker from host h, pid p" until the map names our rank
  zmq::context_t ctx{1};
  int wake_fd = -1;
  std::thread thread;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<Command> commands;
  bool have_map = false;
  ClusterMap map;
  uint32_t rank = 0;
  bool refused = false;
  std::string refused_reason;
  bool aborted = false;
  std::string abort_reason;
  std::atomic<bool> stopping{false};
  std::map<std::string, uint64_t> releases;   // barrier name -> number of releases seen
  std::map<std::string, bool> release_votes;  // barrier name -> whether its last release said some node voted
  bool joins_running = false;                 // ClusterMap.joinsRunning
  std::optional<EpochPlan> plan;              // the last epoch plan received
  uint64_t grants = 0;                        // batchesGranted received
  int64_t grant_epoch = 0;                    // the last one's epoch, first batch and count
  BatchGrant grant;
  bool shut_down = false;  // a shutdown arrived
  std::deque<ClusterEvent> pending_events;
  std::function<void(const ClusterEvent&)> callback;
  bool leave_requested = false;
  bool thread_done = false;
  // The map arrived: probe the clock offset with 10 heartbeats 20 ms apart (the coordinator may be
  // busy writing cluster.json when the first one comes, so one echo can take long; the fastest wins).
  bool map_arrived = false;
  std::deque<std::pair<uint64_t, Clock::time_point>> heartbeats_sent;  // background thread only: recent seq, time
  ClockOffset offset;                                                  // under mu

  void wake() {
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_fd, &one, sizeof one);
    (void)ignored;
  }

  // A request the coordinator answers (a barrier, an epoch's start, a batch claim), under `lock` (held on mu): throws
  // "WHAT: the job was aborted: ..." or "WHAT: already left the job" when the node may no longer ask; else queues `c`
  // and waits at most `timeout` for `answered()` (or, with `or_shutdown`, a shutdown). True when answered; false when
  // it timed out or a shutdown came (the caller tells which). Throws "WHAT interrupted: the job was aborted: ..." or
  // "WHAT: left the job while waiting" when that happened meanwhile.
  bool ask(std::unique_lock<std::mutex>& lock, const std::string& what, Command c, std::chrono::milliseconds timeout,
           const std::function<bool()>& answered, bool or_shutdown = false) {
    if (aborted) throw Error(what + ": the job was aborted: " + abort_reason);
    if (leave_requested || thread_done) throw Error(what + ": already left the job");
    commands.push_back(std::move(c));
    lock.unlock();
    wake();
    lock.lock();
    cv.wait_for(lock, timeout, [&] { return answered() || aborted || (or_shutdown && shut_down) || thread_done; });
    if (answered()) return true;
    if (aborted) throw Error(what + " interrupted: the job was aborted: " + abort_reason);
    if (or_shutdown && shut_down) return false;
    if (thread_done) throw Error(what + ": left the job while waiting");
    return false;
  }

  void push(Command c) {
    {
      std::lock_guard<std::mutex> lock(mu);
      commands.push_back(std::move(c));
    }
    wake();
  }

  // Called on the background thread with `mu` NOT held.
  void deliver_events() {
    std::function<void(const ClusterEvent&)> cb;
    std::deque<ClusterEvent> events;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!callback || pending_events.empty()) return;
      cb = callback;
      events.swap(pending_events);
    }
    for (const ClusterEvent& e : events) {
      try {
        cb(e);
      } catch (const std::exception& ex) {
        PSHARD_LOG(kError) << "cluster event callback threw: " << ex.what();
      }
    }
  }

  void raise_abort(const std::string& reason, const NodeInfo* dead) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (aborted) return;
      aborted = true;
      abort_reason = reason;
      ClusterEvent e;
      e.kind = ClusterEvent::Kind::kAbort;
      e.reason = reason;
      if (dead) e.node = *dead;
      pending_events.push_back(e);
    }
    stopping = true;
    cv.notify_all();
  }

  void send(zmq::socket_t& sock, capnp::MessageBuilder& b) {
    zmq::message_t frame = cc::encode(b);
    (void)sock.send(frame, zmq::send_flags::dontwait);  // a lost heartbeat is harmless; others are queued
  }

  void refuse(const std::string& reason) {
    PSHARD_LOG(kError) << "coordinator " << opt.coordinator << " refused registration: " << reason;
    {
      std::lock_guard<std::mutex> lock(mu);
      refused = true;
      refused_reason = reason;
    }
    stopping = true;
    cv.notify_all();
  }

  void on_message(const zmq::message_t& frame) {
    cc::Decoded msg(frame, "coordinator " + opt.coordinator);
    auto root = msg.root();
    switch (root.which()) {
      case control::ControlMessage::REGISTER_REFUSED: {
        refuse(root.getRegisterRefused().getReason().cStr());
        break;
      }
      case control::ControlMessage::CLUSTER_MAP: {
        auto cm = root.getClusterMap();
        ClusterMap m;
        m.num_servers = cm.getNumServers();
        m.num_workers = cm.getNumWorkers();
        m.min_workers = cm.getMinWorkers();
        for (auto n : cm.getServers()) m.servers.push_back(cc::read_node(n));
        for (auto n : cm.getWorkers()) m.workers.push_back(cc::read_node(n));
        if (m.servers.size() != m.num_servers || m.workers.size() != m.num_workers) {
          throw Error("cluster map from coordinator " + opt.coordinator + " lists " + std::to_string(m.servers.size()) +
                      " servers and " + std::to_string(m.workers.size()) + " workers but announces " +
                      std::to_string(m.num_servers) + " and " + std::to_string(m.num_workers));
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          if (have_map) break;
          map_arrived = true;
          map = std::move(m);
          rank = cm.getYourRank();
          joins_running = cm.getJoinsRunning();
          have_map = true;
        }
        cv.notify_all();
        break;
      }
      case control::ControlMessage::BARRIER_RELEASE: {
        {
          std::lock_guard<std::mutex> lock(mu);
          auto release = root.getBarrierRelease();
          ++releases[release.getName().cStr()];
          release_votes[release.getName().cStr()] = release.getAnyVote();
        }
        cv.notify_all();
        break;
      }
      case control::ControlMessage::EPOCH_PLAN: {
        auto ep = root.getEpochPlan();
        EpochPlan p;
        p.epoch = ep.getEpoch();
        p.first_step = ep.getFirstStep();
        p.join = ep.getJoin();
        for (uint32_t r : ep.getMembers()) p.members.push_back(r);
        {
          std::lock_guard<std::mutex> lock(mu);
          plan = std::move(p);
        }
        cv.notify_all();
        break;
      }
      case control::ControlMessage::BATCHES_GRANTED: {
        auto g = root.getBatchesGranted();
        {
          std::lock_guard<std::mutex> lock(mu);
          ++grants;
          grant_epoch = g.getEpoch();
          grant = BatchGrant{g.getFirst(), static_cast<int64_t>(g.getCount())};
        }
        cv.notify_all();
        break;
      }
      case control::ControlMessage::HEARTBEAT: on_echo(root.getHeartbeat()); break;
      case control::ControlMessage::NODE_DEAD: {
        ClusterEvent e;
        const bool left = root.getNodeDead().getLeft();
        e.kind = left ? ClusterEvent::Kind::kWorkerLeft : ClusterEvent::Kind::kNodeDead;
        e.node = cc::read_node(root.getNodeDead().getNode());
        e.reason = cc::describe(e.node) + (left ? " left: " : " is dead: ") + root.getNodeDead().getReason().cStr();
        if (left) {
          PSHARD_LOG(kInfo) << e.reason;
        } else {
          PSHARD_LOG(kWarn) << e.reason;
        }
        std::lock_guard<std::mutex> lock(mu);
        pending_events.push_back(e);
        break;
      }
      case control::ControlMessage::WORKER_REGISTERED: {
        ClusterEvent e;
        e.kind = ClusterEvent::Kind::kWorkerRegistered;
        e.node = cc::read_node(root.getWorkerRegistered());
        std::lock_guard<std::mutex> lock(mu);
        pending_events.push_back(e);
        break;
      }
      case control::ControlMessage::ABORT: {
        auto a = root.getAbort();
        std::string reason = a.getReason().cStr();
        PSHARD_LOG(kError) << "job aborted by the coordinator: " << reason;
        if (a.getHasDeadNode()) {
          NodeInfo dead = cc::read_node(a.getDeadNode());
          raise_abort(reason, &dead);
        } else {
          raise_abort(reason, nullptr);
        }
        break;
      }
      case control::ControlMessage::SHUTDOWN: {
        ClusterEvent e;
        e.kind = ClusterEvent::Kind::kShutdown;
        e.reason = root.getShutdown().getReason().cStr();
        {
          std::lock_guard<std::mutex> lock(mu);
          pending_events.push_back(e);
          shut_down = true;
        }
        stopping = true;
        cv.notify_all();
        break;
      }
      default:
        PSHARD_LOG(kWarn) << "unexpected control message (type " << static_cast<int>(root.which())
                          << ") from coordinator " << opt.coordinator;
    }
  }

  // A heartbeat echo: one sample of the clock offset; the one with the shortest round trip wins.
  void on_echo(control::Heartbeat::Reader h) {
    const Clock::time_point received = Clock::now();
    if (h.getCoordinatorClockNs() == 0) return;
    for (const auto& [seq, sent] : heartbeats_sent) {
      if (seq != h.getSeq()) continue;
      const int64_t t0 = std::chrono::duration_cast<std::chrono::nanoseconds>(sent.time_since_epoch()).count();
      const int64_t t1 = std::chrono::duration_cast<std::chrono::nanoseconds>(received.time_since_epoch()).count();
      std::lock_guard<std::mutex> lock(mu);
      ++offset.samples;
      if (offset.rtt_ns < 0 || t1 - t0 < offset.rtt_ns) {
        offset.rtt_ns = t1 - t0;
        offset.offset_ns = h.getCoordinatorClockNs() - (t0 + (t1 - t0) / 2);
      }
      return;
    }
  }

  // The control thread's own clock of the conversation.
  struct Conversation {
    Clock::time_point last_heard = Clock::now();
    bool heard_once = false;
    Clock::time_point next_heartbeat = Clock::now();
    uint64_t seq = 0;
    int clock_probes = 0;  // quick heartbeats still to send after the map arrived
  };

  // Connects and registers; false (the refusal recorded) when the coordinator's address is unusable.
  bool connect_and_register(zmq::socket_t& sock) {
    try {
      sock.connect(opt.coordinator);
    } catch (const zmq::error_t& e) {
      {
        std::lock_guard<std::mutex> lock(mu);
        refused = true;
        refused_reason = "cannot connect to coordinator '" + opt.coordinator + "': " + e.what();
        thread_done = true;
      }
      cv.notify_all();
      return false;
    }
    capnp::MallocMessageBuilder b;
    auto r = b.initRoot<control::ControlMessage>().initRegister();
    r.setRole(cc::to_wire(opt.role));
    r.setRequestedRank(opt.requested_rank);
    r.setEndpoint(opt.endpoint);
    r.setHost(opt.host);
    r.setPid(::getpid());
    r.setLocality(host_locality());
    r.setJobToken(opt.job_token);
    r.setLayoutFingerprint(opt.layout_fingerprint);
    r.setReplacesLive(opt.replaces_live);
    send(sock, b);
    return true;
  }

  // Sends what the caller's threads queued; false once a leave or stop was among it (the loop ends).
  bool send_commands(zmq::socket_t& sock) {
    std::deque<Command> todo;
    {
      std::lock_guard<std::mutex> lock(mu);
      todo.swap(commands);
    }
    bool running = true;
    for (const Command& c : todo) {
      if (c.kind != Command::Kind::kStop) {
        capnp::MallocMessageBuilder b;
        cluster_client_detail::build_command(c, b);
        if (c.kind != Command::Kind::kReport) {
          send(sock, b);
        } else if (zmq::message_t frame = cc::encode(b); !sock.send(frame, zmq::send_flags::dontwait)) {
          // never block the heartbeat thread
          PSHARD_LOG(kWarn) << "metrics report dropped: the queue to coordinator " << opt.coordinator << " is full";
        }
      }
      if (c.kind == Command::Kind::kLeave || c.kind == Command::Kind::kStop) running = false;
    }
    return running;
  }

  // A heartbeat when one is due (ten quick ones after the map arrived: they measure the clock offset), then the
  // verdict on silence: a coordinator that refused this node in the handshake, or has not been heard for too long.
  void keep_alive(zmq::socket_t& sock, Conversation& talk, transport::HandshakeWatch& handshakes) {
    const auto now = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu);
      if (map_arrived) {
        map_arrived = false;
        talk.clock_probes = 10;
        talk.next_heartbeat = now;
      }
    }
    if (now >= talk.next_heartbeat) {
      capnp::MallocMessageBuilder b;
      b.initRoot<control::ControlMessage>().initHeartbeat().setSeq(++talk.seq);
      heartbeats_sent.emplace_back(talk.seq, Clock::now());
      if (heartbeats_sent.size() > 16) heartbeats_sent.pop_front();
      send(sock, b);
      talk.next_heartbeat = now + (talk.clock_probes > 0 ? milliseconds(20) : opt.heartbeat_interval);
      if (talk.clock_probes > 0) --talk.clock_probes;
    }
    if (!talk.heard_once && !stopping.load()) {
      if (const std::string why = handshakes.refusal(); !why.empty()) refuse("it " + why);
    }
    const auto silence_limit = talk.heard_once ? opt.heartbeat_timeout : opt.rendezvous_timeout;
    if (now - talk.last_heard > silence_limit && !stopping.load()) {
      raise_abort("coordinator " + opt.coordinator + " silent for " +
                      std::to_string(std::chrono::duration_cast<milliseconds>(now - talk.last_heard).count()) +
                      " ms (" + (talk.heard_once ? "heartbeat timeout" : "never answered") + ")" +
                      (!talk.heard_once && opt.curve.enabled() ? "; security.curve is on: check --key-dir" : ""),
                  nullptr);
    }
  }

  // Waits (up to the next heartbeat, at most 100 ms) for the coordinator or the caller's wake-up, then handles what
  // arrived.
  void receive(zmq::socket_t& sock, Conversation& talk) {
    zmq::pollitem_t items[2] = {{sock.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd, ZMQ_POLLIN, 0}};
    auto wait = std::chrono::duration_cast<milliseconds>(talk.next_heartbeat - Clock::now());
    wait = std::max(milliseconds(0), std::min(wait, milliseconds(100)));
    zmq::poll(items, 2, wait);
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t v;
      ssize_t ignored = ::read(wake_fd, &v, sizeof v);
      (void)ignored;
    }
    for (int n = 0; n < 1000; ++n) {
      zmq::message_t frame;
      if (!sock.recv(frame, zmq::recv_flags::dontwait)) break;
      talk.last_heard = Clock::now();
      talk.heard_once = true;
      try {
        on_message(frame);
      } catch (const Error& e) {
        PSHARD_LOG(kWarn) << e.what();
      } catch (const kj::Exception& e) {
        PSHARD_LOG(kWarn) << "malformed control message from coordinator " << opt.coordinator << ": "
                          << e.getDescription().cStr();
      }
    }
  }

  void loop() {
    zmq::socket_t sock(ctx, zmq::socket_type::dealer);
    sock.set(zmq::sockopt::routing_id, opt.host + "/" + std::to_string(::getpid()) + "/" + random_hex(8));
    sock.set(zmq::sockopt::linger, 2000);
    transport::bound_client(sock, transport::kMaxControlMessageBytes);
    transport::apply_client_auth(sock, opt.curve, opt.job_token);
    // A coordinator that refuses this node's token or key does so in the handshake and never answers: the
    // watch tells why.
    transport::HandshakeWatch handshakes(ctx, sock, transport::job_mechanism(opt.curve, opt.job_token));
    if (!connect_and_register(sock)) return;
    Conversation talk;
    talk.next_heartbeat = Clock::now() + opt.heartbeat_interval;
    while (send_commands(sock)) {
      keep_alive(sock, talk, handshakes);
      deliver_events();
      receive(sock, talk);
    }
    deliver_events();
    {
      // After an abort or a refusal the coordinator is gone or does not care:
      // do not wait for undeliverable messages.
      std::lock_guard<std::mutex> lock(mu);
      if (aborted || refused) sock.set(zmq::sockopt::linger, 0);
    }
    sock.close();  // pending messages (the leave) are flushed within the linger period
    {
      std::lock_guard<std::mutex> lock(mu);
      thread_done = true;
    }
    cv.notify_all();
  }

  void stop_thread(Command::Kind kind, int status, const std::string& reason = "", int64_t steps_pushed = -1) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (leave_requested) return;
      leave_requested = true;
      commands.push_back(Command{kind, reason, status, {}, 0, steps_pushed, false});
    }
    wake();
    if (thread.joinable() && std::this_thread::get_id() != thread.get_id()) thread.join();
  }
};

ClusterClient::Options ClusterClient::Options::from_config(const Config& cfg, NodeRole role,
                                                           const std::string& coordinator, const NodeEnv& env) {
  Options o;
  o.coordinator = coordinator;
  o.role = role;
  o.requested_rank = env.rank;
  o.job_token = env.job_token;
  o.heartbeat_interval = std::chrono::milliseconds(cfg.get_int("cluster.heartbeat_interval_ms"));
  o.heartbeat_timeout = std::chrono::milliseconds(cfg.get_int("cluster.heartbeat_timeout_ms"));
  o.rendezvous_timeout = std::chrono::milliseconds(cfg.get_int("cluster.rendezvous_timeout_ms"));
  return o;
}

ClusterClient::ClusterClient(const Options& options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.opt = options;
  if (m.opt.host.empty()) m.opt.host = host_name();
  if (m.opt.requested_rank < 0) {
    if (std::optional<int64_t> env = env_count("PSHARD_RANK")) m.opt.requested_rank = *env;
  }
  if (m.opt.coordinator.empty()) throw Error("cluster: no coordinator endpoint given (--coordinator)");
  if (m.opt.heartbeat_interval <= milliseconds(0) || m.opt.heartbeat_timeout <= m.opt.heartbeat_interval) {
    throw Error("cluster: heartbeat timeout (" + std::to_string(m.opt.heartbeat_timeout.count()) +
                " ms) must be longer than the heartbeat interval (" + std::to_string(m.opt.heartbeat_interval.count()) +
                " ms)");
  }
  m.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (m.wake_fd < 0) throw Error("cluster: eventfd failed");
  m.thread = start_thread([&m] { m.loop(); });

  // Wait for the map; the coordinator's own rendezvous timeout (which names
  // who is missing) should fire first, so allow a little slack.
  const auto slack = std::min(milliseconds(2000), std::max(milliseconds(100), m.opt.rendezvous_timeout / 4));
  const auto deadline = Clock::now() + m.opt.rendezvous_timeout + slack;
  std::string failure;
  {
    std::unique_lock<std::mutex> lock(m.mu);
    m.cv.wait_until(lock, deadline, [&] { return m.have_map || m.refused || m.aborted || m.thread_done; });
    if (m.refused) {
      failure = "registration with coordinator " + m.opt.coordinator + " refused: " + m.refused_reason;
    } else if (m.aborted) {
      failure = "job aborted during rendezvous (coordinator " + m.opt.coordinator + "): " + m.abort_reason;
    } else if (!m.have_map) {
      failure = "rendezvous with coordinator " + m.opt.coordinator + " timed out after " +
                std::to_string(m.opt.rendezvous_timeout.count()) +
                " ms: no cluster map (is the coordinator running, and were all servers and workers started?)";
    }
  }
  if (!failure.empty()) {
    m.stop_thread(Impl::Command::Kind::kStop, 0);
    ::close(m.wake_fd);
    throw Error(failure);
  }
  PSHARD_LOG(kDebug) << "registered with coordinator " << m.opt.coordinator << " as " << role_name(m.opt.role) << " "
                     << m.rank;
}

ClusterClient::~ClusterClient() {
  impl_->stop_thread(Impl::Command::Kind::kLeave, std::uncaught_exceptions() > 0 ? 1 : 0);
  if (impl_->thread.joinable()) impl_->thread.join();
  ::close(impl_->wake_fd);
}

const ClusterMap& ClusterClient::map() const { return impl_->map; }

uint32_t ClusterClient::rank() const { return impl_->rank; }

void ClusterClient::barrier(const std::string& name, std::chrono::milliseconds timeout) {
  (void)barrier_vote(name, false, timeout);
}

bool ClusterClient::barrier_vote(const std::string& name, bool vote, std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  const std::string what = "barrier '" + name + "' on " + role_name(m.opt.role) + " " + std::to_string(m.rank);
  const uint64_t generation = m.releases[name];
  if (m.ask(lock, what, Impl::Command{Impl::Command::Kind::kBarrier, name, 0, {}, 0, 0, vote}, timeout,
            [&] { return m.releases[name] > generation; })) {
    return m.release_votes[name];
  }
  throw Error(what + " timed out after " + std::to_string(timeout.count()) +
              " ms: not every live node of the job reached it (coordinator " + m.opt.coordinator + ")");
}

bool ClusterClient::joins_running() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->joins_running;
}

std::optional<EpochPlan> ClusterClient::enter_epoch(int64_t epoch, int64_t step, std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  const std::string what = "the start of epoch " + (epoch > 0 ? std::to_string(epoch) : std::string("to join")) +
                           " on worker " + std::to_string(m.rank);
  // Plans come in epoch order; the one asked for is the first with a later epoch than the last seen.
  const int64_t seen = m.plan ? m.plan->epoch : 0;
  if (m.ask(
          lock, what, Impl::Command{Impl::Command::Kind::kEpochEnter, "", 0, {}, epoch, step, false}, timeout,
          [&] { return m.plan && m.plan->epoch > seen && (epoch <= 0 || m.plan->epoch >= epoch); },
          /*or_shutdown=*/true)) {
    return m.plan;
  }
  if (m.shut_down) return std::nullopt;
  throw Error(what + " timed out after " + std::to_string(timeout.count()) +
              " ms: the coordinator sent no plan (coordinator " + m.opt.coordinator + ")");
}

ClusterClient::BatchGrant ClusterClient::claim_batches(int64_t epoch, int64_t batches, uint32_t count,
                                                       std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  const std::string what =
      "claiming batches of epoch " + std::to_string(epoch) + " on worker " + std::to_string(m.rank);
  // One claim at a time (the training thread's): the next grant is its answer.
  const uint64_t seen = m.grants;
  if (!m.ask(lock, what,
             Impl::Command{Impl::Command::Kind::kBatchClaim, "", static_cast<int>(count), {}, epoch, batches, false},
             timeout, [&] { return m.grants > seen; })) {
    throw Error(what + " timed out after " + std::to_string(timeout.count()) +
                " ms: the coordinator did not answer (coordinator " + m.opt.coordinator + ")");
  }
  if (m.grant_epoch != epoch) {
    throw Error(what + ": the coordinator granted batches of epoch " + std::to_string(m.grant_epoch));
  }
  return m.grant;
}

void ClusterClient::epoch_joined(int64_t epoch) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->leave_requested) return;
    impl_->commands.push_back(Impl::Command{Impl::Command::Kind::kEpochJoined, "", 0, {}, epoch, 0, false});
  }
  impl_->wake();
}

void ClusterClient::on_event(std::function<void(const ClusterEvent&)> callback) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->callback = std::move(callback);
  }
  impl_->wake();
}

void ClusterClient::report(const Json& event) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->leave_requested) return;  // after leave() there is nobody to report to
    impl_->commands.push_back(Impl::Command{Impl::Command::Kind::kReport, event.dump(), 0, {}, 0, 0, false});
  }
  impl_->wake();
}

void ClusterClient::tell(JobFact fact, int64_t step, const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->leave_requested) return;
    impl_->commands.push_back(
        Impl::Command{Impl::Command::Kind::kFact, path, static_cast<int>(fact), {}, 0, step, false});
  }
  impl_->wake();
}

void ClusterClient::report_stuck(const std::vector<uint32_t>& workers, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->leave_requested) return;
    impl_->commands.push_back(Impl::Command{Impl::Command::Kind::kStuck, reason, 0, workers, 0, 0, false});
  }
  impl_->wake();
}

bool ClusterClient::stopping() const { return impl_->stopping.load(); }

ClockOffset ClusterClient::clock_offset() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->offset;
}

void ClusterClient::leave(int exit_status, const std::string& reason, int64_t steps_pushed) {
  impl_->stop_thread(Impl::Command::Kind::kLeave, exit_status, reason, steps_pushed);
}

}  // namespace pshard
