// The coordinator's event loop and the job's life (rendezvous, running, shutting down, done): one
// thread owns the ROUTER socket and all job state; the parts it calls own one concern each.
#include "common/control/coordinator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/config/job_shape.h"
#include "common/control/barriers.h"
#include "common/control/batch_claims.h"
#include "common/control/control_codec.h"
#include "common/control/epoch_plans.h"
#include "common/control/job_metrics.h"
#include "common/control/job_verdict.h"
#include "common/control/liveness.h"
#include "common/control/peers.h"
#include "common/control/push_counts.h"
#include "common/control/rendezvous.h"
#include "common/error.h"
#include "common/transport/bounds.h"
#include "common/transport/peer_auth.h"
#include "common/transport/refusal_log.h"
#include "common/util/json.h"
#include "common/util/log.h"
#include "common/util/signals.h"

namespace pshard {

using coordinator_detail::Barriers;
using coordinator_detail::BatchClaims;
using coordinator_detail::Clock;
using coordinator_detail::describe_unranked;
using coordinator_detail::EpochPlans;
using coordinator_detail::JobMetrics;
using coordinator_detail::Liveness;
using coordinator_detail::most_pushed;
using coordinator_detail::MostPushed;
using coordinator_detail::one_line;
using coordinator_detail::Outbox;
using coordinator_detail::Peer;
using coordinator_detail::Peers;
using coordinator_detail::reachable;
using coordinator_detail::Rendezvous;
using coordinator_detail::short_of;
using coordinator_detail::short_reason;
using std::chrono::milliseconds;
namespace cc = control_codec;

Coordinator::Options Coordinator::Options::from_config(const Config& config, uint32_t num_servers,
                                                       uint32_t num_workers) {
  Options o;
  o.num_servers = num_servers;
  o.num_workers = num_workers;
  const JobShape job = JobShape::from_config(config);
  o.min_workers = job.min_workers;
  o.failure_policy = job.may_lose_workers() ? FailurePolicy::kContinue : FailurePolicy::kAbort;
  o.heartbeat_interval = milliseconds(config.get_int("cluster.heartbeat_interval_ms"));
  o.heartbeat_timeout = milliseconds(config.get_int("cluster.heartbeat_timeout_ms"));
  o.rendezvous_timeout = milliseconds(config.get_int("cluster.rendezvous_timeout_ms"));
  o.shutdown_timeout = std::max(o.heartbeat_timeout * 2, milliseconds(10000));
  o.trace = TraceWindow::parse(config.get_string("trace.steps"), "trace.steps");
  return o;
}

struct Coordinator::Impl {
  using Phase = JobPhase;

  explicit Impl(const Options& options) : opt(options) {
    // An elastic job drops a dead worker: failure policy continue, whatever the options said.
    if (opt.min_workers > 0) opt.failure_policy = FailurePolicy::kContinue;
    barriers.set_aside([this](const Peer& p) { return epochs.waiting_to_join(p); });
  }

  Options opt;
  zmq::context_t ctx{1};
  zmq::socket_t router{ctx, zmq::socket_type::router};
  std::unique_ptr<transport::PeerAuthenticator> auth;  // peers authenticate in the handshake (peer_auth.h)
  std::string endpoint;

  // Loop state (owned by the loop thread).
  Phase phase = Phase::kRendezvous;
  Peers peers;
  Outbox outbox{router};
  transport::RefusalLog refusals{"coordinator"};  // malformed or refused control messages, per peer address
  // The parts keep references to the members above (declared first, so constructed first).
  Rendezvous rendezvous{opt, endpoint, peers, outbox};
  Barriers barriers{peers, outbox};
  Liveness liveness{opt, peers, outbox};
  JobMetrics metrics{opt, peers};
  EpochPlans epochs{opt, peers, outbox, [this](const EpochPlan& plan, const std::set<std::string>& members) {
                      metrics.set_epoch_members(plan.epoch, members);
                    }};
  BatchClaims claims{outbox};  // cluster.batch_assignment = dynamic: who trains which of each epoch's batches
  Clock::time_point started;
  Clock::time_point shutdown_deadline;
  Result result;
  std::map<uint32_t, std::string> worker_lost_why;  // worker rank -> why its last process was declared dead
  std::string stopped_why;  // a worker left with kExitStopped: the job stopped at a checkpoint (its words)

  // Cross-thread state.
  mutable std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  bool running = false;
  ClusterMap published_map;
  std::atomic<bool> stop_requested{false};
  std::string stop_reason;
  std::thread thread;

  // --- ending the job --------------------------------------------------------
  void finish(int exit_code, const std::string& reason) {
    metrics.write_trace();
    const bool ran_to_end = exit_code == 0 || exit_code == Coordinator::kExitWorkersLost || exit_code == kExitStopped;
    try {
      metrics.write_summary(ran_to_end ? "" : reason);
    } catch (const Error& e) {
      PSHARD_LOG(kError) << "metrics summary not written: " << e.what();
      metrics.mark_incomplete();
    }
    if ((exit_code == 0 || exit_code == kExitStopped) && !metrics.complete()) {
      PSHARD_LOG(kError) << "the job finished, but its records in " << opt.run_dir
                         << " are incomplete (a write failed: see above)";
      exit_code = kExitRecordsIncomplete;
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
    outbox.broadcast(peers, b, reachable);
    finish(dead != nullptr && dead->role == NodeRole::kServer ? Coordinator::kExitServerDead : 1, reason);
  }

  // --- joining ---------------------------------------------------------------
  void on_register(const std::string& id, control::Register::Reader r) {
    std::optional<Peer> p = rendezvous.read(id, r);
    if (!p) return;
    if (phase != Phase::kRendezvous) {
      auto it = peers.find(id);
      if (it != peers.end() && reachable(it->second)) return;  // a duplicate of an accepted registration
      if (phase == Phase::kRunning && p->info.role == NodeRole::kWorker &&
          opt.failure_policy == FailurePolicy::kContinue) {  // (elastic jobs: a worker joining)
        rejoin(*p);
        return;
      }
      rendezvous.refuse(*p, "the job is already running: all " + std::to_string(opt.num_servers) + " servers and " +
                                std::to_string(opt.num_workers) + " workers registered");
      return;
    }
    if (std::optional<std::string> mismatch = rendezvous.admit(*p)) {
      abort_job(*mismatch, nullptr);
      return;
    }
    if (rendezvous.complete()) complete_rendezvous();
  }

  void complete_rendezvous() {
    rendezvous.hand_out_map([this](const ClusterMap& m) { publish(m); });
    phase = Phase::kRunning;
    metrics.start_clock();
    PSHARD_LOG(kInfo) << "rendezvous complete: " << opt.num_servers << " servers, "
                      << rendezvous.map().workers.size() - vacancies() << " workers"
                      << (opt.min_workers > 0 ? " (elastic: " + std::to_string(opt.min_workers) + " to " +
                                                    std::to_string(opt.num_workers) + ")"
                                              : "")
                      << "; cluster map sent";
  }

  uint32_t vacancies() const {
    uint32_t n = 0;
    for (uint32_t r = 0; r < rendezvous.map().workers.size(); ++r) n += rendezvous.map().vacant(r) ? 1 : 0;
    return n;
  }

  // A worker registering while the job runs (failure policy continue) takes over a dead worker's rank; in an elastic
  // job, also a rank no process held yet.
  void rejoin(const Peer& p) {
    if (Peer* old = rendezvous.replaced_by(p)) {
      if (!p.replaces_live) {
        // A second process with the rank's environment (a child that called ps.init()), not a restart: the live
        // worker keeps its rank.
        rendezvous.refuse(p, "worker rank " + std::to_string(old->info.rank) + " is alive (" + cc::describe(old->info) +
                                 "): a second process cannot join the job with its rank; call ps.init() once per " +
                                 "worker (not in a child process), and only a restarted worker (pshard worker " +
                                 "--join) takes over a rank");
        return;
      }
      on_node_failed(*old,
                     "replaced by a new process (pid " + std::to_string(p.info.pid) + ") that registered for its rank");
    }
    if (phase != Phase::kRunning) {  // the replaced worker's death may have ended the job
      rendezvous.refuse(p, "the job is no longer running");
      return;
    }
    if (rendezvous.rejoin(p, [this](const ClusterMap& m) { publish(m); }) && opt.min_workers > 0) {
      epochs.arrived(peers.at(p.id));
    }
  }

  // The map that map() returns and DIR/cluster.json records.
  void publish(const ClusterMap& m) {
    {
      std::lock_guard<std::mutex> lock(mu);
      published_map = m;
    }
    metrics.write_cluster_map(m);
  }

  // --- running ---------------------------------------------------------------
  void on_barrier(Peer& p, const std::string& name, bool vote) {
    if (phase != Phase::kRunning && phase != Phase::kShuttingDown) return;
    barriers.enter(name, p.id, vote);
    abort_if_barriers_stalled();
  }

  // Nodes that named their barriers differently would wait forever (or until each one's timeout, without a word on
  // why): once every live node of a role waits and none can go on, the job ends naming the barriers.
  void abort_if_barriers_stalled() {
    if (phase != Phase::kRunning) return;
    if (std::optional<std::string> why = barriers.stalemate()) abort_job(*why, nullptr);
  }

  // Elastic jobs: the workers disagree on where an epoch starts, or too few have waited too long for others.
  void abort_if_epochs_broken() {
    if (phase != Phase::kRunning || opt.min_workers == 0) return;
    if (std::optional<std::string> why = epochs.check(Clock::now())) abort_job(*why, nullptr);
  }

  // The workers as the job's verdict sees them (job_verdict.h).
  std::vector<WorkerRecord> worker_records() const {
    std::vector<WorkerRecord> out;
    for (const auto& [id, p] : peers) {
      if (p.info.role != NodeRole::kWorker) continue;
      WorkerRecord w;
      w.rank = p.info.rank;
      switch (p.state) {
        case Peer::State::kRegistered: w.state = WorkerRecord::State::kRegistered; break;
        case Peer::State::kLive: w.state = WorkerRecord::State::kLive; break;
        case Peer::State::kLeft: w.state = WorkerRecord::State::kLeft; break;
        case Peer::State::kDead: w.state = WorkerRecord::State::kDead; break;
      }
      w.waiting_to_join = epochs.waiting_to_join(p);
      w.trained = p.trained;
      out.push_back(w);
    }
    return out;
  }

  // A program's loop decides how long it trains; where it declared a length (train.epochs x steps_per_epoch) and
  // every worker stopped short of it, the run is finished, and the summary says so.
  void warn_if_short_of_declared_length() {
    const std::optional<MostPushed> most = most_pushed(peers);
    const int64_t declared = metrics.declared_steps();
    if (!most || declared <= 0 || most->pushed >= declared) return;
    metrics.warn("every worker stopped after " + std::to_string(most->pushed) +
                 " pushed steps, short of the run's declared length (train.epochs x steps_per_epoch = " +
                 std::to_string(declared) + " steps)");
  }

  // The job ran to its end: 0 when every worker finished, else kExitWorkersLost (failure policy continue); or every
  // worker stopped at a checkpoint on SIGTERM: kExitStopped.
  void finish_ran_to_end() {
    const JobVerdict v =
        ran_to_end(worker_records(), opt.num_workers, opt.min_workers > 0, stopped_why, worker_lost_why, result.reason);
    if (v.kind == JobVerdict::Kind::kStopped) {
      PSHARD_LOG(kInfo) << "the job stopped: " << v.reason;
      metrics.mark_stopped(stopped_why);
      finish(kExitStopped, "job stopped: " + v.reason);
      return;
    }
    warn_if_short_of_declared_length();
    if (v.kind == JobVerdict::Kind::kWorkersLost) {
      PSHARD_LOG(kError) << "the job finished without some of its workers (cluster.failure_policy = continue): "
                         << v.reason;
    }
    finish(v.kind == JobVerdict::Kind::kWorkersLost ? Coordinator::kExitWorkersLost : 0, result.reason);
  }

  // Once no worker trains: the servers are told to shut down (or the job is aborted when every worker died).
  void maybe_shutdown() {
    if (phase != Phase::kRunning) return;
    const JobVerdict v = workers_done(worker_records(), opt.num_workers);
    if (v.kind == JobVerdict::Kind::kRunning) return;
    if (v.kind == JobVerdict::Kind::kAllDead) {
      abort_job(v.reason, nullptr);
      return;
    }
    PSHARD_LOG(kInfo) << v.reason << "; telling the servers to shut down";
    capnp::MallocMessageBuilder b;
    b.initRoot<control::ControlMessage>().initShutdown().setReason(v.reason);
    outbox.broadcast(peers, b, [](const Peer& p) { return p.state == Peer::State::kLive; });
    result.reason = v.reason;
    phase = Phase::kShuttingDown;
    shutdown_deadline = Clock::now() + opt.shutdown_timeout;
    maybe_finish_shutdown();
  }

  void maybe_finish_shutdown() {
    if (phase != Phase::kShuttingDown) return;
    for (const auto& [id, p] : peers) {
      if (p.state == Peer::State::kLive) return;
    }
    finish_ran_to_end();
  }

  // A node died (silent, or left with a failure status) or is stuck (`verdict`): acts on failure_verdict.
  void on_node_failed(Peer& p, const std::string& why, const char* verdict = "dead") {
    p.state = Peer::State::kDead;
    if (p.info.role == NodeRole::kWorker) worker_lost_why[p.info.rank] = why;
    if (phase != Phase::kDone) metrics.on_node_failed(p.info, verdict, why);  // the summary stays the last line
    const FailedNode node{p.info.role == NodeRole::kServer, p.info.role == NodeRole::kWorker && p.trained};
    const FailureVerdict v = failure_verdict(node, phase, opt.failure_policy == FailurePolicy::kContinue,
                                             cc::describe(p.info) + " is " + verdict + ": " + why);
    switch (v.kind) {
      case FailureVerdict::Kind::kCountedFinished:
        // Under continue the others are told, so that the lowest live worker saves the model when it was worker 0.
        PSHARD_LOG(kWarn) << v.reason << ", after it had pushed the job's last step: counted as finished";
        if (opt.failure_policy == FailurePolicy::kContinue) liveness.announce_dead(p, why);
        break;
      case FailureVerdict::Kind::kDuringShutdown:
        PSHARD_LOG(kWarn) << v.reason << " (during shutdown)";
        maybe_finish_shutdown();
        return;
      case FailureVerdict::Kind::kAbort: abort_job(v.reason, &p.info); return;
      case FailureVerdict::Kind::kContinue:
        PSHARD_LOG(kWarn) << v.reason << "; continuing with the other workers (cluster.failure_policy = continue)";
        liveness.announce_dead(p, std::string(verdict) == "dead" ? why : verdict + (": " + why));
        break;
    }
    // The worker no longer holds up a barrier, an epoch's start or an epoch line.
    epochs.worker_gone(p);
    barriers.release_complete();
    abort_if_barriers_stalled();
    metrics.flush_epochs();
    maybe_shutdown();
  }

  // A server says that live workers hold the job up without pushing: each is treated as dead under the failure
  // policy, and, since it is alive and would keep heartbeating, told to exit. A worker the coordinator already
  // counts as dead or gone is not judged again.
  void on_stuck(const Peer& server, control::Stuck::Reader stuck) {
    if (server.info.role != NodeRole::kServer) {
      PSHARD_LOG(kWarn) << "ignoring a stuck report from " << cc::describe(server.info) << ": only servers judge";
      return;
    }
    if (phase != Phase::kRunning) return;
    const std::string why = cc::describe(server.info) + " reports: " + one_line(stuck.getReason().cStr(), 1024);
    for (uint32_t rank : stuck.getWorkers()) {
      if (phase != Phase::kRunning) return;  // an earlier rank's verdict ended the job
      auto it = std::find_if(peers.begin(), peers.end(), [&](const auto& kv) {
        return kv.second.info.role == NodeRole::kWorker && kv.second.info.rank == rank &&
               kv.second.state == Peer::State::kLive;
      });
      if (it == peers.end()) continue;
      Peer& w = it->second;
      on_node_failed(w, why, "stuck");
      const std::string told = phase == Phase::kDone ? result.reason
                                                     : cc::describe(w.info) + " is stuck: " + why +
                                                           "; the job goes on without it (cluster.failure_policy = "
                                                           "continue)";
      liveness.dismiss(w, told);
    }
  }

  // A worker's fact of the job: trained (a death from here on costs the job nothing), rejoined, saved the model.
  void on_fact(Peer& p, control::JobFact::Reader fact) {
    if (p.info.role != NodeRole::kWorker) return;
    switch (fact.getKind()) {
      case control::JobFact::Kind::TRAINED: p.trained = true; break;
      case control::JobFact::Kind::REJOINED: metrics.on_rejoined(p, fact.getStep()); break;
      case control::JobFact::Kind::MODEL_SAVED:
        metrics.on_model_saved(std::string(fact.getPath().cStr()).substr(0, 4096));
        break;
    }
  }

  // The launcher (or pshard join) saw a node's process end: the node is dead now, not when its heartbeats would have
  // been missed. Only with the job's token (a job without one takes no such word from anybody), and only for the live
  // node of that role, rank (any, from pshard join) and pid, on the notice's host when it names one.
  void on_process_ended(control::ProcessEnded::Reader ended) {
    const std::string token = ended.getJobToken().cStr();
    if (opt.job_token.empty() || !transport::same_secret(token, opt.job_token)) {
      PSHARD_LOG(kWarn) << "ignoring a process-ended notice without this job's token";
      return;
    }
    Peer* p = live_process(peers, cc::from_wire(ended.getRole()), ended.getAnyRank(), ended.getRank(), ended.getPid(),
                           ended.getLocality().cStr());
    if (p == nullptr) return;
    const std::string how = one_line(ended.getHow().cStr(), 256);
    on_node_failed(*p,
                   "its process " + how + (ended.getAnyRank() ? " (pshard join" : " (pshard launch") + " saw it end)");
  }

  // Each worker that left cleanly with fewer pushes than another (push_counts.h), or than a live worker's step line
  // says it pushed (so that under abort the job does not train on to its end first), is the job's failure; the ones
  // that went on are not. Elastic members train different steps: their epochs decide. True: the job ended here.
  bool judge_pushes(const NodeInfo* went_on_live = nullptr, int64_t went_to_live = -1) {
    if (opt.min_workers > 0) return false;
    const std::optional<MostPushed> most = most_pushed(peers, went_on_live, went_to_live);
    if (!most) return false;
    for (const std::string& id : short_of(peers, *most)) {
      Peer& q = peers.at(id);
      q.trained = false;  // its last epoch report does not make up for the steps it did not push
      on_node_failed(q, short_reason(q.pushed, *most), "short of the others");
      if (phase != Phase::kRunning) return true;
    }
    return false;
  }

  // A live worker's step line ("step": the index of the step it just took, so it pushed one more): a worker that left
  // with fewer pushes is short of it.
  void on_step_line(const Peer& p, const std::string& text) {
    const Json line = Json::parse(text, "step line");  // on_report parsed it already
    if (!line.has("step") || !line.at("step").is_number()) return;
    const NodeInfo reporter = p.info;
    judge_pushes(&reporter, line.at("step").as_int() + 1);
  }

  void on_leave(Peer& p, int status, const std::string& reason, int64_t pushed) {
    if (p.state == Peer::State::kRegistered) {
      PSHARD_LOG(kWarn) << describe_unranked(p) << " left before the rendezvous completed (status " << status << ")";
      peers.erase(p.id);
      return;
    }
    if (p.state != Peer::State::kLive) return;
    if (status == kExitStopped && p.info.role == NodeRole::kWorker) {
      // Every worker stops at the same step boundary, which the servers checkpointed (checkpoint.on_sigterm).
      if (stopped_why.empty()) stopped_why = reason.empty() ? "stopped on SIGTERM" : reason;
      status = 0;
    }
    if (status != 0) {
      on_node_failed(p, "it left with exit status " + std::to_string(status) + (reason.empty() ? "" : ": " + reason));
      return;
    }
    if (p.info.role == NodeRole::kServer && phase == Phase::kRunning) {
      p.state = Peer::State::kLeft;
      abort_job(cc::describe(p.info) + " left before the job finished", &p.info);
      return;
    }
    p.state = Peer::State::kLeft;
    const bool worker = p.info.role == NodeRole::kWorker;
    if (worker) p.pushed = pushed;
    PSHARD_LOG(kInfo) << cc::describe(p.info) << " left"
                      << (worker && pushed >= 0 ? " after " + std::to_string(pushed) + " pushed steps" : "");
    if (worker && phase == Phase::kRunning && pushed >= 0) {
      if (judge_pushes()) return;
      if (p.state == Peer::State::kLeft) liveness.announce_left(p);
    }
    epochs.worker_gone(p);
    barriers.release_complete();
    abort_if_barriers_stalled();
    maybe_shutdown();
    maybe_finish_shutdown();
  }

  void on_message(const std::string& id, const zmq::message_t& frame) {
    const std::string address = transport::peer_address(frame);
    auto it = peers.find(id);
    std::string peer_name = it != peers.end() ? describe_unranked(it->second) : "an unregistered peer";
    try {
      cc::Decoded msg(frame, peer_name);
      auto root = msg.root();
      if (root.which() == control::ControlMessage::REGISTER) {
        on_register(id, root.getRegister());
        return;
      }
      if (root.which() == control::ControlMessage::PROCESS_ENDED) {  // from the launcher, not a node
        on_process_ended(root.getProcessEnded());
        return;
      }
      if (it == peers.end()) {
        PSHARD_LOG(kDebug) << "ignoring a control message from an unregistered peer";
        return;
      }
      Peer& p = it->second;
      if (!reachable(p)) return;
      Liveness::heard_from(p);
      switch (root.which()) {
        case control::ControlMessage::HEARTBEAT: liveness.echo(id, root.getHeartbeat().getSeq()); break;
        case control::ControlMessage::BARRIER_ENTER: {
          auto enter = root.getBarrierEnter();
          on_barrier(p, enter.getName().cStr(), enter.getVote());
          break;
        }
        case control::ControlMessage::LEAVE: {
          auto leave = root.getLeave();
          on_leave(p, leave.getExitStatus(), one_line(leave.getReason().cStr(), 1024), leave.getStepsPushed());
          break;
        }
        case control::ControlMessage::REPORT: {
          const std::string kind = metrics.on_report(p, root.getReport().getJson().cStr());
          if (kind == "step" && p.info.role == NodeRole::kWorker && phase == Phase::kRunning) {
            on_step_line(p, root.getReport().getJson().cStr());
          }
          break;
        }
        case control::ControlMessage::JOB_FACT: on_fact(p, root.getJobFact()); break;
        case control::ControlMessage::STUCK: on_stuck(p, root.getStuck()); break;
        case control::ControlMessage::EPOCH_ENTER:
          if (phase == Phase::kRunning) {
            epochs.enter(p, root.getEpochEnter().getEpoch(), root.getEpochEnter().getStep());
            abort_if_epochs_broken();
          }
          break;
        case control::ControlMessage::EPOCH_JOINED:
          if (phase == Phase::kRunning) epochs.joined(p, root.getEpochJoined().getEpoch());
          break;
        case control::ControlMessage::BATCH_CLAIM:
          if (p.info.role != NodeRole::kWorker) throw Error(cc::describe(p.info) + " claimed batches: only workers");
          try {  // a claim counting an epoch differently ends the job: its workers would train different data
            claims.answer(p, root.getBatchClaim());
          } catch (const Error& e) {
            abort_job(cc::describe(p.info) + ": " + e.what(), nullptr);
          }
          break;
        default:
          PSHARD_LOG(kWarn) << "unexpected control message (type " << static_cast<int>(root.which()) << ") from "
                            << peer_name;
      }
    } catch (const Error& e) {
      refusals.add(address, "refused", std::string(e.what()) + " (at " + address + ")");
    } catch (const kj::Exception& e) {
      refusals.add(address, "malformed",
                   "malformed control message from " + peer_name + " at " + address + ": " + e.getDescription().cStr());
    }
  }

  void check_timers() {
    const auto now = Clock::now();
    if (phase == Phase::kRendezvous && now - started > opt.rendezvous_timeout) {
      abort_job("rendezvous timed out after " + std::to_string(opt.rendezvous_timeout.count()) +
                    " ms: " + rendezvous.missing_description(),
                nullptr);
      return;
    }
    if (phase == Phase::kShuttingDown && now > shutdown_deadline) {
      std::string stuck;
      for (const auto& [id, p] : peers) {
        if (p.state == Peer::State::kLive) stuck += (stuck.empty() ? "" : ", ") + cc::describe(p.info);
      }
      PSHARD_LOG(kWarn) << "shutdown: " << stuck << " did not leave within " << opt.shutdown_timeout.count() << " ms";
      finish_ran_to_end();
      return;
    }
    abort_if_epochs_broken();
    if (phase == Phase::kDone) return;
    for (const std::string& id : liveness.silent(now)) {
      auto it = peers.find(id);
      if (it == peers.end() || phase == Phase::kDone) continue;
      Peer& p = it->second;
      if (p.state == Peer::State::kRegistered) {
        PSHARD_LOG(kWarn) << describe_unranked(p) << " went silent before the rendezvous completed; dropping it";
        peers.erase(it);
        continue;
      }
      on_node_failed(p, liveness.silence());
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
      refusals.flush();
    }
    refusals.flush();
    if (outbox.dropped() > 0) {
      PSHARD_LOG(kInfo) << "coordinator: dropped " << outbox.dropped()
                        << " control messages to peers that were gone or did not read them";
    }
    router.close();  // pending messages (abort, shutdown) are flushed within the linger period
    return result;
  }
};
Coordinator::Coordinator(const Options& options) : impl_(std::make_unique<Impl>(options)) {
  Impl& m = *impl_;
  if (options.num_servers == 0 || options.num_workers == 0) {
    throw Error("coordinator: a job needs at least one server and one worker (got " +
                std::to_string(options.num_servers) + " servers, " + std::to_string(options.num_workers) + " workers)");
  }
  if (options.min_workers > options.num_workers) {
    throw Error("coordinator: cluster.min_workers = " + std::to_string(options.min_workers) +
                " is more than the job's " + std::to_string(options.num_workers) + " workers");
  }
  transport::bound_router(m.router, transport::kMaxControlMessageBytes);
  m.router.set(zmq::sockopt::linger, 1000);
  m.router.set(zmq::sockopt::router_handover, 1);  // a node reconnecting with its routing id takes it over
  m.auth =
      std::make_unique<transport::PeerAuthenticator>(m.ctx, m.router, options.curve, options.job_token, "coordinator");
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
  impl_->thread = start_thread([this] { run(); });
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
