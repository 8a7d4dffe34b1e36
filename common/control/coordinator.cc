// The coordinator's event loop: one thread owns the ROUTER socket and all job state.
#include "common/control/coordinator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/control/control_codec.h"
#include "common/error.h"
#include "common/metrics/epoch_report.h"
#include "common/metrics/metrics_writer.h"
#include "common/metrics/progress.h"
#include "common/util/binary_file.h"
#include "common/util/json.h"
#include "common/util/log.h"

namespace pshard {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
namespace cc = control_codec;

std::string hex64(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// One process that registered.
struct Peer {
  enum class State { kRegistered, kLive, kLeft, kDead };
  std::string id;  // ZeroMQ routing id
  NodeInfo info;   // rank valid once State >= kLive
  int64_t requested_rank = -1;
  uint64_t fingerprint = 0;
  Clock::time_point registered_at;
  Clock::time_point last_seen;
  State state = State::kRegistered;
};

// "worker from host a, pid 7" for a node that has no rank yet.
std::string describe_unranked(const Peer& p) {
  std::string s = std::string(role_name(p.info.role));
  if (p.requested_rank >= 0) s += " (requested rank " + std::to_string(p.requested_rank) + ")";
  return s + " from host " + p.info.host + ", pid " + std::to_string(p.info.pid);
}

}  // namespace

Coordinator::Options Coordinator::Options::from_config(const Config& config, uint32_t num_servers,
                                                       uint32_t num_workers) {
  Options o;
  o.num_servers = num_servers;
  o.num_workers = num_workers;
  o.failure_policy =
      config.get_string("cluster.failure_policy") == "continue" ? FailurePolicy::kContinue : FailurePolicy::kAbort;
  o.heartbeat_interval = milliseconds(config.get_int("cluster.heartbeat_interval_ms"));
  o.heartbeat_timeout = milliseconds(config.get_int("cluster.heartbeat_timeout_ms"));
  o.rendezvous_timeout = milliseconds(config.get_int("cluster.rendezvous_timeout_ms"));
  o.shutdown_timeout = std::max(o.heartbeat_timeout * 2, milliseconds(10000));
  return o;
}

struct Coordinator::Impl {
  enum class Phase { kRendezvous, kRunning, kShuttingDown, kDone };

  Options opt;
  zmq::context_t ctx{1};
  zmq::socket_t router{ctx, zmq::socket_type::router};
  std::unique_ptr<transport::CurveServer> curve;  // ZAP handler when security.curve is on
  std::string endpoint;

  // Loop state (owned by the loop thread).
  Phase phase = Phase::kRendezvous;
  std::map<std::string, Peer> peers;                      // routing id -> peer
  std::map<std::string, std::set<std::string>> barriers;  // barrier name -> routing ids that entered
  Clock::time_point started;
  Clock::time_point shutdown_deadline;
  Result result;

  // Job-wide metrics (reports from the workers).
  std::unique_ptr<MetricsWriter> metrics;
  Json start_event = Json::object();
  std::map<int64_t, std::map<uint32_t, WorkerEpochReport>> epoch_reports;  // epoch -> worker rank -> report
  RunTotals totals;
  int64_t epochs_written = 0;
  int64_t last_epoch_written = 0;
  Clock::time_point running_since;

  // Cross-thread state.
  mutable std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  bool running = false;
  ClusterMap published_map;
  std::atomic<bool> stop_requested{false};
  std::string stop_reason;
  std::thread thread;

  // --- sending -------------------------------------------------------------
  void send(const std::string& id, capnp::MessageBuilder& builder) {
    zmq::message_t frame = cc::encode(builder);
    // ROUTER drops messages to unknown or gone peers instead of blocking.
    (void)router.send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    (void)router.send(frame, zmq::send_flags::dontwait);
  }

  void send_refused(const std::string& id, const std::string& reason) {
    capnp::MallocMessageBuilder b;
    b.initRoot<control::ControlMessage>().initRegisterRefused().setReason(reason);
    send(id, b);
  }

  template <typename Pred>
  void broadcast(capnp::MessageBuilder& b, Pred include) {
    for (auto& [id, p] : peers) {
      if (include(p)) send(id, b);
    }
  }

  static bool reachable(const Peer& p) { return p.state == Peer::State::kRegistered || p.state == Peer::State::kLive; }

  // --- ending the job --------------------------------------------------------
  void finish(int exit_code, const std::string& reason) {
    try {
      write_summary();
    } catch (const Error& e) {
      PSHARD_LOG(kWarn) << "metrics summary not written: " << e.what();
    }
    result.exit_code = exit_code;
    result.reason = reason;
    phase = Phase::kDone;
  }

  void abort_job(const std::string& reason, const NodeInfo* dead) {
    PSHARD_LOG(kError) << "aborting the job: " << reason;
    capnp::MallocMessageBuilder b;
    auto a = b.initRoot<control::ControlMessage>().initAbort();
    a.setReason(reason);
    a.setHasDeadNode(dead != nullptr);
    if (dead) cc::fill_node(*dead, a.initDeadNode());
    broadcast(b, reachable);
    finish(1, reason);
  }

  // --- metrics ---------------------------------------------------------------
  MetricsWriter* writer() {
    if (!metrics && !opt.run_dir.empty()) metrics = std::make_unique<MetricsWriter>(opt.run_dir);
    return metrics.get();
  }

  void on_report(const Peer& p, const std::string& text) {
    Json event = Json::parse(text, "metrics report from " + cc::describe(p.info));
    const std::string kind = event.at("event").as_string();
    if (kind == "start") {
      start_event = event;  // also feeds the summary
      // The first line of metrics.jsonl: what runs (launch's progress line reads it).
      if (MetricsWriter* w = writer()) w->write(event);
    } else if (kind == "worker_epoch") {
      WorkerEpochReport r = WorkerEpochReport::from_json(event);
      r.rank = p.info.rank;
      if (r.epoch <= last_epoch_written) return;  // a rejoined worker's part of an epoch already written
      epoch_reports[r.epoch][r.rank] = r;
      flush_epochs();
    } else if (MetricsWriter* w = writer()) {
      w->write(event);
    }
  }

  // Writes every epoch for which all workers still in the job reported.
  void flush_epochs() {
    size_t expected_reports = 0;
    for (const auto& [id, q] : peers) {
      if (q.info.role == NodeRole::kWorker && (q.state == Peer::State::kLive || q.state == Peer::State::kLeft)) {
        ++expected_reports;
      }
    }
    while (!epoch_reports.empty() && epoch_reports.begin()->second.size() >= expected_reports) {
      std::vector<WorkerEpochReport> reports;
      for (const auto& [rank, r] : epoch_reports.begin()->second) reports.push_back(r);
      last_epoch_written = epoch_reports.begin()->first;
      epoch_reports.erase(epoch_reports.begin());
      Json epoch = combine_epoch(reports);
      totals.add_epoch(epoch);
      ++epochs_written;
      if (MetricsWriter* w = writer()) w->write(epoch);
      const int64_t planned = start_event.has("epochs") ? start_event.at("epochs").as_int() : 0;
      PSHARD_LOG(kInfo) << format_epoch_line(epoch, planned);
    }
  }

  void write_summary() {
    if (epochs_written == 0) return;
    Json summary = totals.summary(std::chrono::duration<double>(Clock::now() - running_since).count());
    for (const auto& [key, value] : start_event.items()) {
      if (key != "event" && key != "epochs" && key != "steps_per_epoch" && !summary.has(key)) summary.set(key, value);
    }
    summary.set("workers", opt.num_workers);
    summary.set("servers", opt.num_servers);
    Json finished = Json::array();
    for (const auto& [id, q] : peers) {
      if (q.info.role == NodeRole::kWorker && q.state == Peer::State::kLeft) finished.push(q.info.rank);
    }
    summary.set("workers_finished", finished);
    if (MetricsWriter* w = writer()) w->write(summary);
    PSHARD_LOG(kInfo) << format_summary_line(summary, opt.run_dir);
  }

  // --- rendezvous ------------------------------------------------------------
  uint32_t count_role(NodeRole role) const {
    uint32_t n = 0;
    for (const auto& [id, p] : peers) n += (p.info.role == role && reachable(p)) ? 1 : 0;
    return n;
  }

  uint32_t expected(NodeRole role) const { return role == NodeRole::kServer ? opt.num_servers : opt.num_workers; }

  void on_register(const std::string& id, control::Register::Reader r) {
    Peer p;
    p.id = id;
    p.info.host = r.getHost().cStr();
    p.info.pid = r.getPid();
    p.info.endpoint = r.getEndpoint().cStr();
    p.requested_rank = r.getRequestedRank();
    p.fingerprint = r.getLayoutFingerprint();
    p.registered_at = p.last_seen = Clock::now();
    std::string who = "host " + p.info.host + ", pid " + std::to_string(p.info.pid);
    try {
      p.info.role = cc::from_wire(r.getRole());
    } catch (const Error& e) {
      send_refused(id, e.what());
      return;
    }
    who = std::string(role_name(p.info.role)) + " from " + who;

    auto refuse = [&](const std::string& reason) {
      PSHARD_LOG(kWarn) << "refused registration of " << who << ": " << reason;
      send_refused(id, reason);
    };
    if (std::string(r.getJobToken().cStr()) != opt.job_token) {
      refuse("job token mismatch: the coordinator at " + endpoint +
             " runs another job (PSHARD_JOB_TOKEN differs); this process belongs to a different job or was started "
             "by hand without the job's token");
      return;
    }
    if (p.info.role == NodeRole::kCoordinator) {
      refuse("a coordinator cannot register as a node");
      return;
    }
    if (phase != Phase::kRendezvous) {
      auto it = peers.find(id);
      if (it != peers.end() && reachable(it->second)) return;  // a duplicate of an accepted registration
      if (phase == Phase::kRunning && p.info.role == NodeRole::kWorker &&
          opt.failure_policy == FailurePolicy::kContinue) {
        rejoin(id, p, refuse);
        return;
      }
      refuse("the job is already running: all " + std::to_string(opt.num_servers) + " servers and " +
             std::to_string(opt.num_workers) + " workers registered");
      return;
    }
    peers.erase(id);  // a re-registration replaces the previous one
    const uint32_t want = expected(p.info.role);
    if (count_role(p.info.role) >= want) {
      refuse("the job already has all " + std::to_string(want) + " " + role_name(p.info.role) + "s registered");
      return;
    }
    if (p.requested_rank >= 0) {
      if (p.requested_rank >= static_cast<int64_t>(want)) {
        refuse("requested " + std::string(role_name(p.info.role)) + " rank " + std::to_string(p.requested_rank) +
               " is out of range: the job has " + std::to_string(want) + " " + role_name(p.info.role) + "s");
        return;
      }
      for (const auto& [oid, o] : peers) {
        if (reachable(o) && o.info.role == p.info.role && o.requested_rank == p.requested_rank) {
          refuse(std::string(role_name(p.info.role)) + " rank " + std::to_string(p.requested_rank) +
                 " is already taken by " + describe_unranked(o));
          return;
        }
      }
    }
    if (p.fingerprint != 0) {
      for (const auto& [oid, o] : peers) {
        if (!reachable(o) || o.fingerprint == 0 || o.fingerprint == p.fingerprint) continue;
        std::string reason = "layout fingerprint mismatch: " + describe_unranked(p) + " computed " +
                             hex64(p.fingerprint) + " but " + describe_unranked(o) + " computed " +
                             hex64(o.fingerprint) +
                             "; the nodes disagree on the slice assignment (different model, "
                             "cluster.slice_bytes or number of servers?)";
        send_refused(id, reason);
        abort_job(reason, nullptr);
        return;
      }
    }
    PSHARD_LOG(kInfo) << "registered " << describe_unranked(p)
                      << (p.info.endpoint.empty() ? "" : " at " + p.info.endpoint);
    peers[id] = p;
    if (count_role(NodeRole::kServer) == opt.num_servers && count_role(NodeRole::kWorker) == opt.num_workers) {
      complete_rendezvous();
    }
  }

  // A worker registering while the job runs (failure policy continue) takes over the rank of a dead
  // worker: it gets the cluster map with itself in it and is live from now on (docs/OPERATIONS.md).
  template <typename Refuse>
  void rejoin(const std::string& id, Peer p, Refuse refuse) {
    // A restarted process asking for its old rank usually comes before the heartbeat timeout
    // declared the old one dead: the new registration replaces it (same job token, same rank).
    for (auto& [oid, o] : peers) {
      if (o.info.role == NodeRole::kWorker && o.state == Peer::State::kLive &&
          static_cast<int64_t>(o.info.rank) == p.requested_rank) {
        on_node_failed(
            o, "replaced by a new process (pid " + std::to_string(p.info.pid) + ") that registered for its rank");
        break;
      }
    }
    if (phase != Phase::kRunning) {
      refuse("the job is no longer running");
      return;
    }
    std::set<uint32_t> dead, live;
    for (const auto& [oid, o] : peers) {
      if (o.info.role != NodeRole::kWorker) continue;
      if (o.state == Peer::State::kDead) dead.insert(o.info.rank);
      if (o.state == Peer::State::kLive || o.state == Peer::State::kLeft) live.insert(o.info.rank);
      if (o.state == Peer::State::kLive && o.fingerprint != 0 && p.fingerprint != 0 && o.fingerprint != p.fingerprint) {
        refuse("layout fingerprint mismatch with the running " + cc::describe(o.info) + ": " + hex64(p.fingerprint) +
               " vs " + hex64(o.fingerprint));
        return;
      }
    }
    for (uint32_t r : live) dead.erase(r);
    int64_t rank = -1;
    if (p.requested_rank >= 0) {
      if (dead.count(static_cast<uint32_t>(p.requested_rank))) rank = p.requested_rank;
    } else if (!dead.empty()) {
      rank = *dead.begin();
    }
    if (rank < 0) {
      refuse("the job is already running and " +
             (p.requested_rank >= 0 ? "worker rank " + std::to_string(p.requested_rank) + " is not dead"
                                    : std::string("no worker is dead")) +
             ": a worker can only rejoin in place of a dead one");
      return;
    }
    p.info.rank = static_cast<uint32_t>(rank);
    p.state = Peer::State::kLive;
    peers.erase(id);
    peers[id] = p;
    ClusterMap m;
    {
      std::lock_guard<std::mutex> lock(mu);
      published_map.workers.at(p.info.rank) = p.info;
      m = published_map;
    }
    send_map(id, m, p.info);
    PSHARD_LOG(kInfo) << cc::describe(p.info) << " rejoined the job in place of the dead worker " << rank;
    if (!opt.run_dir.empty()) write_cluster_json(m);
  }

  void send_map(const std::string& id, const ClusterMap& m, const NodeInfo& to) {
    capnp::MallocMessageBuilder b;
    auto cm = b.initRoot<control::ControlMessage>().initClusterMap();
    cm.setNumServers(m.num_servers);
    cm.setNumWorkers(m.num_workers);
    auto servers = cm.initServers(m.num_servers);
    for (uint32_t i = 0; i < m.num_servers; ++i) cc::fill_node(m.servers[i], servers[i]);
    auto workers = cm.initWorkers(m.num_workers);
    for (uint32_t i = 0; i < m.num_workers; ++i) cc::fill_node(m.workers[i], workers[i]);
    cm.setYourRole(cc::to_wire(to.role));
    cm.setYourRank(to.rank);
    cm.setHeartbeatIntervalMs(static_cast<uint32_t>(opt.heartbeat_interval.count()));
    cm.setHeartbeatTimeoutMs(static_cast<uint32_t>(opt.heartbeat_timeout.count()));
    send(id, b);
  }

  void assign_ranks(NodeRole role) {
    std::vector<Peer*> mine;
    for (auto& [id, p] : peers) {
      if (p.info.role == role && reachable(p)) mine.push_back(&p);
    }
    std::sort(mine.begin(), mine.end(),
              [](const Peer* a, const Peer* b) { return a->registered_at < b->registered_at; });
    std::vector<bool> taken(expected(role), false);
    for (Peer* p : mine) {
      if (p->requested_rank >= 0) {
        p->info.rank = static_cast<uint32_t>(p->requested_rank);
        taken[p->info.rank] = true;
      }
    }
    uint32_t next = 0;
    for (Peer* p : mine) {
      if (p->requested_rank >= 0) continue;
      while (taken[next]) ++next;
      p->info.rank = next;
      taken[next] = true;
    }
  }

  void complete_rendezvous() {
    assign_ranks(NodeRole::kServer);
    assign_ranks(NodeRole::kWorker);
    ClusterMap m;
    m.num_servers = opt.num_servers;
    m.num_workers = opt.num_workers;
    m.servers.resize(opt.num_servers);
    m.workers.resize(opt.num_workers);
    for (auto& [id, p] : peers) {
      if (!reachable(p)) continue;
      p.state = Peer::State::kLive;
      (p.info.role == NodeRole::kServer ? m.servers : m.workers)[p.info.rank] = p.info;
    }
    for (auto& [id, p] : peers) {
      if (p.state == Peer::State::kLive) send_map(id, m, p.info);
    }
    phase = Phase::kRunning;
    running_since = Clock::now();
    PSHARD_LOG(kInfo) << "rendezvous complete: " << opt.num_servers << " servers, " << opt.num_workers
                      << " workers; cluster map sent";
    {
      std::lock_guard<std::mutex> lock(mu);
      published_map = m;
    }
    if (!opt.run_dir.empty()) write_cluster_json(m);
  }

  // Replaced atomically, so that a reader polling for it (a test, a script) never sees half a file;
  // spaced as it always was, because scripts grep it (tests/slurm/slurm_cluster_test.sh).
  void write_cluster_json(const ClusterMap& m) {
    Json nodes = Json::array();
    for (const auto* list : {&m.servers, &m.workers}) {
      for (const NodeInfo& n : *list) {
        nodes.push(Json::object()
                       .set("role", role_name(n.role))
                       .set("rank", n.rank)
                       .set("host", n.host)
                       .set("pid", n.pid)
                       .set("endpoint", n.endpoint));
      }
    }
    Json doc = Json::object().set("num_servers", m.num_servers).set("num_workers", m.num_workers).set("nodes", nodes);
    try {
      binary::write_file_atomically(opt.run_dir + "/cluster.json", doc.dump_spaced() + "\n", "cannot write");
    } catch (const Error& e) {
      PSHARD_LOG(kWarn) << e.what();
    }
  }

  std::string missing_description() const {
    std::ostringstream out;
    for (NodeRole role : {NodeRole::kServer, NodeRole::kWorker}) {
      uint32_t have = count_role(role), want = expected(role);
      out << (role == NodeRole::kServer ? "" : "; ") << have << " of " << want << " " << role_name(role)
          << "s registered";
      if (have == want) continue;
      std::vector<bool> requested(want, false);
      uint32_t unrequested = 0;
      for (const auto& [id, p] : peers) {
        if (p.info.role != role || !reachable(p)) continue;
        if (p.requested_rank >= 0) {
          requested[p.requested_rank] = true;
        } else {
          ++unrequested;
        }
      }
      std::vector<uint32_t> free_ranks;
      for (uint32_t r = 0; r < want; ++r) {
        if (!requested[r]) free_ranks.push_back(r);
      }
      // Unrequested registrations take the lowest free ranks; the rest are missing.
      out << " (missing " << role_name(role) << " rank" << (want - have > 1 ? "s" : "");
      for (size_t i = unrequested; i < free_ranks.size(); ++i) out << (i == unrequested ? " " : ", ") << free_ranks[i];
      out << ")";
    }
    return out.str();
  }

  // --- running ---------------------------------------------------------------
  void check_barriers() {
    for (auto it = barriers.begin(); it != barriers.end();) {
      bool complete = true;
      for (const auto& [id, p] : peers) {
        if (p.state == Peer::State::kLive && !it->second.count(id)) complete = false;
      }
      if (!complete) {
        ++it;
        continue;
      }
      capnp::MallocMessageBuilder b;
      b.initRoot<control::ControlMessage>().initBarrierRelease().setName(it->first);
      for (const std::string& id : it->second) {
        if (peers.at(id).state == Peer::State::kLive) send(id, b);
      }
      PSHARD_LOG(kDebug) << "barrier '" << it->first << "' released";
      it = barriers.erase(it);
    }
  }

  void on_barrier(Peer& p, const std::string& name) {
    if (phase != Phase::kRunning && phase != Phase::kShuttingDown) return;
    barriers[name].insert(p.id);
    check_barriers();
  }

  bool workers_all_done(uint32_t* left_ok) const {
    uint32_t ok = 0;
    for (const auto& [id, p] : peers) {
      if (p.info.role != NodeRole::kWorker) continue;
      if (p.state == Peer::State::kLive) return false;
      if (p.state == Peer::State::kLeft) ++ok;
    }
    *left_ok = ok;
    return true;
  }

  void maybe_shutdown() {
    if (phase != Phase::kRunning) return;
    uint32_t left_ok = 0;
    if (!workers_all_done(&left_ok)) return;
    if (left_ok == 0) {
      abort_job("every worker is dead", nullptr);
      return;
    }
    std::string reason = "job finished: " + std::to_string(left_ok) + " of " + std::to_string(opt.num_workers) +
                         " workers left successfully";
    PSHARD_LOG(kInfo) << reason << "; telling the servers to shut down";
    capnp::MallocMessageBuilder b;
    b.initRoot<control::ControlMessage>().initShutdown().setReason(reason);
    broadcast(b, [](const Peer& p) { return p.state == Peer::State::kLive; });
    result.reason = reason;
    phase = Phase::kShuttingDown;
    shutdown_deadline = Clock::now() + opt.shutdown_timeout;
    maybe_finish_shutdown();
  }

  void maybe_finish_shutdown() {
    if (phase != Phase::kShuttingDown) return;
    for (const auto& [id, p] : peers) {
      if (p.state == Peer::State::kLive) return;
    }
    finish(0, result.reason);
  }

  // A node died (silent, or left with a failure status): apply the failure policy.
  void on_node_failed(Peer& p, const std::string& why) {
    p.state = Peer::State::kDead;
    std::string reason = cc::describe(p.info) + " is dead: " + why;
    if (phase == Phase::kShuttingDown) {
      PSHARD_LOG(kWarn) << reason << " (during shutdown)";
      maybe_finish_shutdown();
      return;
    }
    if (opt.failure_policy == FailurePolicy::kAbort) {
      abort_job(reason + " (cluster.failure_policy = abort)", &p.info);
      return;
    }
    if (p.info.role == NodeRole::kServer) {
      abort_job(reason + " (a dead server always ends the job)", &p.info);
      return;
    }
    PSHARD_LOG(kWarn) << reason << "; continuing with the other workers (cluster.failure_policy = continue)";
    capnp::MallocMessageBuilder b;
    auto nd = b.initRoot<control::ControlMessage>().initNodeDead();
    cc::fill_node(p.info, nd.initNode());
    nd.setReason(why);
    broadcast(b, [](const Peer& q) { return q.state == Peer::State::kLive; });
    check_barriers();
    flush_epochs();
    maybe_shutdown();
  }

  void on_leave(Peer& p, int status) {
    if (p.state == Peer::State::kRegistered) {
      PSHARD_LOG(kWarn) << describe_unranked(p) << " left before the rendezvous completed (status " << status << ")";
      peers.erase(p.id);
      return;
    }
    if (p.state != Peer::State::kLive) return;
    if (status != 0) {
      on_node_failed(p, "it left with exit status " + std::to_string(status));
      return;
    }
    if (p.info.role == NodeRole::kServer && phase == Phase::kRunning) {
      p.state = Peer::State::kLeft;
      abort_job(cc::describe(p.info) + " left before the job finished", &p.info);
      return;
    }
    p.state = Peer::State::kLeft;
    PSHARD_LOG(kInfo) << cc::describe(p.info) << " left";
    check_barriers();
    maybe_shutdown();
    maybe_finish_shutdown();
  }

  void on_message(const std::string& id, const zmq::message_t& frame) {
    auto it = peers.find(id);
    std::string peer_name = it != peers.end() ? describe_unranked(it->second) : "an unregistered peer";
    try {
      cc::Decoded msg(frame, peer_name);
      auto root = msg.root();
      if (root.which() == control::ControlMessage::REGISTER) {
        on_register(id, root.getRegister());
        return;
      }
      if (it == peers.end()) {
        PSHARD_LOG(kDebug) << "ignoring a control message from an unregistered peer";
        return;
      }
      Peer& p = it->second;
      if (!reachable(p)) return;
      p.last_seen = Clock::now();
      switch (root.which()) {
        case control::ControlMessage::HEARTBEAT: {
          capnp::MallocMessageBuilder b;
          b.initRoot<control::ControlMessage>().initHeartbeat().setSeq(root.getHeartbeat().getSeq());
          send(id, b);
          break;
        }
        case control::ControlMessage::BARRIER_ENTER: on_barrier(p, root.getBarrierEnter().getName().cStr()); break;
        case control::ControlMessage::LEAVE: on_leave(p, root.getLeave().getExitStatus()); break;
        case control::ControlMessage::REPORT: on_report(p, root.getReport().getJson().cStr()); break;
        default:
          PSHARD_LOG(kWarn) << "unexpected control message (type " << static_cast<int>(root.which()) << ") from "
                            << peer_name;
      }
    } catch (const Error& e) {
      PSHARD_LOG(kWarn) << e.what();
    } catch (const kj::Exception& e) {
      PSHARD_LOG(kWarn) << "malformed control message from " << peer_name << ": " << e.getDescription().cStr();
    }
  }

  void check_timers() {
    const auto now = Clock::now();
    if (phase == Phase::kRendezvous && now - started > opt.rendezvous_timeout) {
      abort_job("rendezvous timed out after " + std::to_string(opt.rendezvous_timeout.count()) +
                    " ms: " + missing_description(),
                nullptr);
      return;
    }
    if (phase == Phase::kShuttingDown && now > shutdown_deadline) {
      std::string stuck;
      for (const auto& [id, p] : peers) {
        if (p.state == Peer::State::kLive) stuck += (stuck.empty() ? "" : ", ") + cc::describe(p.info);
      }
      PSHARD_LOG(kWarn) << "shutdown: " << stuck << " did not leave within " << opt.shutdown_timeout.count() << " ms";
      finish(0, result.reason);
      return;
    }
    std::vector<std::string> silent;
    for (auto& [id, p] : peers) {
      if (reachable(p) && now - p.last_seen > opt.heartbeat_timeout) silent.push_back(id);
    }
    for (const std::string& id : silent) {
      auto it = peers.find(id);
      if (it == peers.end() || phase == Phase::kDone) continue;
      Peer& p = it->second;
      if (p.state == Peer::State::kRegistered) {
        PSHARD_LOG(kWarn) << describe_unranked(p) << " went silent before the rendezvous completed; dropping it";
        peers.erase(it);
        continue;
      }
      on_node_failed(p, "no heartbeat for " + std::to_string(opt.heartbeat_timeout.count()) + " ms");
    }
  }

  Result loop() {
    started = Clock::now();
    PSHARD_LOG(kInfo) << "waiting for " << opt.num_servers << " servers and " << opt.num_workers << " workers at "
                      << endpoint;
    const auto tick = std::min(milliseconds(50), std::max(milliseconds(1), opt.heartbeat_interval / 2));
    while (phase != Phase::kDone) {
      if (stop_requested.load()) {
        std::string reason;
        {
          std::lock_guard<std::mutex> lock(mu);
          reason = stop_reason;
        }
        abort_job("coordinator stopped: " + reason, nullptr);
        break;
      }
      zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, tick);
      for (int n = 0; n < 1000 && phase != Phase::kDone; ++n) {
        zmq::message_t id, frame;
        if (!router.recv(id, zmq::recv_flags::dontwait)) break;
        if (!id.more()) continue;
        (void)router.recv(frame, zmq::recv_flags::none);
        while (frame.more()) {  // control messages are one frame: drop the rest
          zmq::message_t extra;
          (void)router.recv(extra, zmq::recv_flags::none);
          frame.rebuild(0);
        }
        on_message(id.to_string(), frame);
      }
      if (phase != Phase::kDone) check_timers();
    }
    router.close();  // pending messages (abort, shutdown) are flushed within the linger period
    return result;
  }
};

Coordinator::Coordinator(const Options& options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.opt = options;
  if (options.num_servers == 0 || options.num_workers == 0) {
    throw Error("coordinator: a job needs at least one server and one worker (got " +
                std::to_string(options.num_servers) + " servers, " + std::to_string(options.num_workers) + " workers)");
  }
  m.router.set(zmq::sockopt::linger, 1000);
  m.router.set(zmq::sockopt::router_handover, 1);  // a node reconnecting with its routing id takes it over
  m.curve = std::make_unique<transport::CurveServer>(m.ctx, m.router, options.curve, "coordinator");
  try {
    m.router.bind(options.bind);
  } catch (const zmq::error_t& e) {
    throw Error("coordinator: cannot bind " + options.bind + ": " + e.what());
  }
  m.endpoint = m.router.get(zmq::sockopt::last_endpoint);
}

Coordinator::~Coordinator() {
  if (impl_->thread.joinable()) {
    request_stop("the coordinator object was destroyed");
    impl_->thread.join();
  }
}

const std::string& Coordinator::endpoint() const { return impl_->endpoint; }

Coordinator::Result Coordinator::run() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->running || impl_->done) throw Error("coordinator: run() called twice");
    impl_->running = true;
  }
  Result r = impl_->loop();
  if (r.exit_code == 0) {
    PSHARD_LOG(kInfo) << r.reason;
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->done = true;
  }
  impl_->done_cv.notify_all();
  return r;
}

void Coordinator::start() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->running || impl_->done) throw Error("coordinator: start() called twice");
  }
  impl_->thread = std::thread([this] { run(); });
}

std::optional<Coordinator::Result> Coordinator::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  if (!impl_->done_cv.wait_for(lock, timeout, [&] { return impl_->done; })) return std::nullopt;
  return impl_->result;
}

void Coordinator::request_stop(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stop_requested.load()) return;
    impl_->stop_reason = reason;
  }
  impl_->stop_requested = true;
}

ClusterMap Coordinator::map() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->published_map;
}

}  // namespace pshard
