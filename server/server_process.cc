// The server process: rendezvous, KvServer, failure policy (see server_process.h).
#include "server/server_process.h"

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <zmq.hpp>

#include "common/checkpoint/checkpoint_file.h"
#include "common/config/config.h"
#include "common/config/job_shape.h"
#include "common/control/cluster_client.h"
#include "common/error.h"
#include "common/run/node_env.h"
#include "common/run/run_directory.h"
#include "common/run/run_settings.h"
#include "common/transport/buffer_pool.h"
#include "common/transport/curve.h"
#include "common/util/binary_file.h"
#include "common/util/env.h"
#include "common/util/host.h"
#include "common/util/json.h"
#include "common/util/log.h"
#include "server/checkpoint/checkpointer.h"
#include "server/kv/kv_server.h"

namespace pshard {
namespace {

// The coordinator's record of a stall (docs/METRICS.md "stall"); it adds when it last heard from each missing worker.
Json stall_event(const StallReport& r) {
  Json missing = Json::array();
  for (uint32_t w : r.missing) missing.push(Json(w));
  Json e = Json::object();
  e.set("event", "stall").set("server", r.server).set("step", r.step).set("waited_s", r.waited_s);
  e.set("missing", std::move(missing)).set("slice", r.slice).set("initial_weights", r.initial_weights);
  return e;
}

// "tcp://IP:PORT" with PORT 0 or "*" gets a free port now (bind, read, close), so the endpoint can be
// announced to the coordinator before the server (which needs the cluster map) is built.
std::string concrete_endpoint(const std::string& bind) {
  const size_t colon = bind.rfind(':');
  if (colon == std::string::npos || bind.compare(0, 6, "tcp://") != 0) {
    throw Error("--bind must look like tcp://IP:PORT, got '" + bind + "'");
  }
  const std::string port = bind.substr(colon + 1);
  if (port != "0" && port != "*") return bind;
  zmq::context_t ctx(1);
  zmq::socket_t probe(ctx, zmq::socket_type::router);
  probe.set(zmq::sockopt::linger, 0);
  try {
    probe.bind(bind.substr(0, colon) + ":*");
  } catch (const zmq::error_t& e) {
    throw Error("cannot bind " + bind + ": " + e.what());
  }
  std::string ep = probe.get(zmq::sockopt::last_endpoint);
  probe.close();
  return ep;
}

// What peers should connect to: a wildcard address is replaced by this host's name.
std::string advertised(const std::string& endpoint) {
  for (const char* any : {"tcp://0.0.0.0:", "tcp://*:"}) {
    const std::string prefix = any;
    if (endpoint.compare(0, prefix.size(), prefix) == 0)
      return "tcp://" + host_name() + ":" + endpoint.substr(prefix.size());
  }
  return endpoint;
}

// How the job ends, set from the cluster client's thread or the server.
struct Outcome {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int status = 0;
  std::string reason;
  void finish(int s, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (done) return;
    done = true;
    status = s;
    reason = why;
    cv.notify_all();
  }
};

// This server's checkpoint of `step`; a server that owns no slices writes none and takes the
// layout from another server's file (KvServer checks that it owns nothing in it).
std::string restore_file(const std::string& dir, const KvServerOptions& opt, int64_t step) {
  const std::string own = checkpoint_path(dir, opt.rank, step);
  if (std::filesystem::exists(own)) return own;
  for (uint32_t s = 0; s < opt.num_servers; ++s) {
    const std::string other = checkpoint_path(dir, s, step);
    if (s != opt.rank && std::filesystem::exists(other)) return other;
  }
  return own;  // KvServer names the missing file
}

}  // namespace

// RUN_DIR/server-R.stats.json: the server_phases event of docs/METRICS.md and the payload bytes it moved.
static void write_standalone_stats(const std::string& run_dir, uint32_t rank, const KvServerStats& st) {
  Json j = st.phases_json(rank);
  j.set("updates", st.updates)
      .set("bytes_received", st.bytes_received)
      .set("bytes_sent", st.bytes_sent)
      .set("shm_bytes_received", st.shm_bytes_received)
      .set("shm_bytes_sent", st.shm_bytes_sent);
  binary::write_file_atomically(run_dir + "/server-" + std::to_string(rank) + ".stats.json", j.dump() + "\n",
                                "server statistics");
}

namespace {

// What every server of the job is: its options from the config, the run directory, the job's token and keys.
KvServerOptions job_options(const ServerProcessOptions& o, const Config& cfg, const NodeEnv& env) {
  KvServerOptions opt = KvServerOptions::from_config(cfg);
  opt.checkpoint_dir = o.run_dir.empty() ? "" : o.run_dir + "/checkpoints";
  opt.settings_hash = fixed_settings_hash(cfg);
  if (o.restore_step >= 0 && opt.checkpoint_dir.empty()) throw Error("pshard server: --restore-step needs --run-dir");
  opt.bind = concrete_endpoint(o.bind);
  opt.job_token = env.job_token;
  opt.curve = transport::job_curve_keys(cfg, transport::curve_key_dir(cfg, o.key_dir, o.run_dir));
  return opt;
}

// The run id: PSHARD_RUN_ID from the launcher, else RUN_DIR/run-id (pshard task: task 0 writes it before it starts
// the coordinator, so it is there once the rendezvous is done). Read after the rendezvous.
std::string job_run_id(const ServerProcessOptions& o, const NodeEnv& env) {
  if (!env.run_id.empty()) return env.run_id;
  return o.run_dir.empty() ? std::string() : read_run_id(o.run_dir);
}

// This server's rank is known: its log prefix, its run id and the checkpoint it restores.
void take_rank(KvServerOptions& opt, uint32_t rank, const ServerProcessOptions& o, const NodeEnv& env,
               log::Level level) {
  opt.rank = rank;
  log::configure("server " + std::to_string(opt.rank), level);
  opt.run_id = job_run_id(o, env);
  if (o.restore_step >= 0) opt.restore_path = restore_file(opt.checkpoint_dir, opt, o.restore_step);
}

// A server without a coordinator (`pshard server --servers S --workers W --rank R`): serves until a worker asks it to
// stop; with a run directory, its figures stay there (it has nobody to report them to).
int run_standalone(const ServerProcessOptions& o, KvServerOptions opt, const NodeEnv& env, log::Level level,
                   int64_t rank) {
  if (o.servers <= 0 || o.workers <= 0 || rank < 0) {
    throw Error("standalone server (no --coordinator) needs --servers, --workers and --rank");
  }
  opt.num_servers = static_cast<uint32_t>(o.servers);
  opt.num_workers = static_cast<uint32_t>(o.workers);
  take_rank(opt, static_cast<uint32_t>(rank), o, env, level);
  std::unique_ptr<Checkpointer> checkpointer;  // stopped after the server
  opt.prepare_store = server_checkpoints(opt, checkpointer);
  KvServer server(opt);
  std::printf("endpoint %s\n", advertised(server.endpoint()).c_str());
  std::fflush(stdout);
  while (!server.wait_for_shutdown(std::chrono::hours(1))) {
  }
  server.stop();
  if (!o.run_dir.empty()) write_standalone_stats(o.run_dir, opt.rank, server.stats());
  return 0;
}

// How the job's events reach this server: a dead worker is dropped when the job goes on without it (failure policy
// continue, an elastic job), else the job is over for this server; so is an abort or the coordinator's shutdown.
void follow_job(ClusterClient& cluster, KvServer& server, Outcome& outcome, bool keep_going) {
  cluster.on_event([&server, &outcome, keep_going](const ClusterEvent& e) {
    switch (e.kind) {
      case ClusterEvent::Kind::kNodeDead:
        if (e.node.role == NodeRole::kWorker && keep_going) {
          server.mark_worker_dead(e.node.rank);
        } else {
          outcome.finish(1, "node dead: " + e.reason);
        }
        break;
      case ClusterEvent::Kind::kWorkerLeft: server.mark_worker_left(e.node.rank); break;
      case ClusterEvent::Kind::kWorkerRegistered: server.worker_registered(e.node.rank, e.node.pid); break;
      case ClusterEvent::Kind::kAbort: outcome.finish(1, e.reason); break;
      case ClusterEvent::Kind::kShutdown: outcome.finish(0, "shutdown"); break;
    }
  });
  std::unique_lock<std::mutex> lock(outcome.mu);
  while (!outcome.done) {
    outcome.cv.wait_for(lock, std::chrono::milliseconds(200));
    if (!outcome.done && server.wait_for_shutdown(std::chrono::milliseconds(0))) {
      outcome.done = true;
      outcome.reason = "shutdown requested by a worker";
    }
  }
}

// The job is over for this server: stops it and its checkpointer (which writes what is complete), logs and reports
// its figures and timeline, and leaves. Returns the process's exit status.
int stop_and_leave(ClusterClient& cluster, KvServer& server, std::unique_ptr<Checkpointer>& checkpointer,
                   const KvServerOptions& opt, const Outcome& outcome, const std::string& run_dir) {
  server.stop();
  if (checkpointer) checkpointer->stop();  // after the slices' threads
  const uint64_t checkpoints_failed = checkpointer ? checkpointer->failed() : 0;
  const KvServerStats st = server.stats();
  PSHARD_LOG(kInfo) << "stopping (" << outcome.reason << "): " << st.requests << " requests from " << st.connections
                    << " connections, " << st.updates << " updates, " << st.errors
                    << " refused; payload MB in/out: " << st.bytes_received / 1e6 << "/" << st.bytes_sent / 1e6
                    << " by TCP, " << st.shm_bytes_received / 1e6 << "/" << st.shm_bytes_sent / 1e6
                    << " by shared memory";
  cluster.report(st.phases_json(opt.rank));  // the summary's server_phases
  if (opt.tracer) write_trace_file(*opt.tracer, run_dir, "server-" + std::to_string(opt.rank), cluster.clock_offset());
  if (outcome.status != 0) {
    PSHARD_LOG(kError) << "job aborted: " << outcome.reason;
    cluster.leave(1);
    return 1;
  }
  cluster.leave(0);
  if (checkpoints_failed > 0) {
    PSHARD_LOG(kError) << checkpoints_failed << " checkpoint(s) could not be written (see above): the run's "
                       << "records are incomplete";
    return kExitRecordsIncomplete;
  }
  return 0;
}

// A server of a job with a coordinator: rendezvous, serve until the job ends, report, leave. An error after the
// rendezvous (an unreadable checkpoint, say) is told to the coordinator, whose abort then names it.
int serve_in_job(const ServerProcessOptions& o, const Config& cfg, KvServerOptions opt, const NodeEnv& env,
                 log::Level level, int64_t rank) {
  ClusterClient::Options copt = ClusterClient::Options::from_config(cfg, NodeRole::kServer, o.coordinator, env);
  copt.requested_rank = rank;
  copt.endpoint = advertised(opt.bind);
  copt.curve = opt.curve;
  copt.layout_fingerprint = 0;  // servers learn the tensor list from worker 0's init (then check every request)
  ClusterClient cluster(copt);
  try {
    opt.num_servers = cluster.map().num_servers;
    opt.num_workers = cluster.map().num_workers;
    take_rank(opt, cluster.rank(), o, env, level);
    // A warning is a metrics event; stuck workers are the coordinator's to judge (the failure policy).
    opt.on_stall = [&cluster](const StallReport& r) {
      if (r.stuck) {
        cluster.report_stuck(r.missing, r.why);
      } else {
        cluster.report(stall_event(r));
      }
    };
    const JobShape job = JobShape::from_config(cfg);
    const TraceWindow window = TraceWindow::parse(cfg.get_string("trace.steps"), "trace.steps");
    if (!window.empty()) opt.tracer = std::make_shared<Tracer>(window, "server " + std::to_string(opt.rank));
    // The server's checkpoints (a restore, and the steps it closes); the checkpointer outlives the server's threads.
    std::unique_ptr<Checkpointer> checkpointer;
    opt.prepare_store = server_checkpoints(opt, checkpointer);
    for (uint32_t r = 0; r < opt.num_workers; ++r) {
      if (cluster.map().vacant(r)) opt.vacant_workers.push_back(r);
      opt.worker_pids.push_back(cluster.map().workers.at(r).pid);
    }
    KvServer server(opt);
    PSHARD_LOG(kInfo) << "serving on " << server.endpoint() << " for " << opt.num_workers << " workers ("
                      << job.mode_name() << ", " << opt.optimizer->name() << ")";
    Outcome outcome;
    follow_job(cluster, server, outcome, job.may_lose_workers() || cluster.map().elastic());
    return stop_and_leave(cluster, server, checkpointer, opt, outcome, o.run_dir);
  } catch (const std::exception& e) {
    cluster.leave(1, e.what());
    throw;
  }
}

}  // namespace

int run_server_process(const ServerProcessOptions& o) {
  Config cfg = Config::from_file(o.config_path, o.overrides);
  const log::Level level = log::level_from_string(cfg.get_string("log.level"));
  log::configure("server", level);
  // checkpoint.on_sigterm = checkpoint: SIGTERM (preemption) reaches every process of the job; the workers stop at the
  // next step boundary, which this server must still checkpoint, and the coordinator's shutdown then ends it.
  if (cfg.get_string("checkpoint.on_sigterm") == "checkpoint") std::signal(SIGTERM, SIG_IGN);
  transport::retain_freed_memory();
  const NodeEnv env = NodeEnv::from_environment();
  const int64_t rank = o.rank >= 0 ? o.rank : env.rank;
  KvServerOptions opt = job_options(o, cfg, env);
  if (o.coordinator.empty()) return run_standalone(o, std::move(opt), env, level, rank);
  return serve_in_job(o, cfg, std::move(opt), env, level, rank);
}

}  // namespace pshard
