// The local launcher: run directory, job plan, supervision, restarts (see local_launch.h).
#include "launcher/local_launch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "common/checkpoint/checkpoint_file.h"
#include "common/config/config.h"
#include "common/config/job_shape.h"
#include "common/control/coordinator.h"
#include "common/control/process_notice.h"
#include "common/error.h"
#include "common/metrics/progress.h"
#include "common/metrics/trace.h"
#include "common/run/run_directory.h"
#include "common/run/run_settings.h"
#include "common/transport/curve.h"
#include "common/util/binary_file.h"
#include "common/util/child_process.h"
#include "common/util/host.h"
#include "common/util/json.h"
#include "launcher/gpu_assignment.h"
#include "launcher/job_plan.h"
#include "launcher/join_job.h"
#include "launcher/local_job.h"
#include "launcher/progress.h"
#include "launcher/remote/host_list.h"
#include "launcher/remote/host_share.h"
#include "launcher/remote/remote_job.h"

namespace pshard {
namespace {

// The failed children, the likely cause first. Which child exits first is a
// race, so order by what the exit says: a signal nobody sent or an exit
// status other than 1 (pshard processes exit 1 when the coordinator aborts
// the job) before plain status-1 exits; workers before servers before the
// coordinator.
// Whether the coordinator ended the job because a server died (Coordinator::kExitServerDead): then a
// server is the cause even when it did not exit (frozen) and the others exited first. Over ssh (--hosts) a host's
// `pshard host` exits so when one of its servers died or its coordinator said so.
bool server_declared_dead(const LocalJob::Result& r) {
  for (const ChildExit& c : r.children) {
    const bool coordinator_or_host = c.role == NodeRole::kCoordinator || !c.role;
    if (coordinator_or_host && c.exited && c.exit_code == Coordinator::kExitServerDead) return true;
  }
  return false;
}

std::vector<const ChildExit*> failures_by_cause(const LocalJob::Result& r) {
  std::vector<const ChildExit*> failed;
  for (const ChildExit& c : r.children) {
    if (c.failed()) failed.push_back(&c);
  }
  const bool server_dead = server_declared_dead(r);
  auto order = [server_dead](const ChildExit* c) {
    // A process that hung when the job was stopped is named after those whose exit says why, and so is
    // the coordinator's report of a dead server.
    const bool reported =
        c->exited &&
        (c->exit_code == 1 || (c->role == NodeRole::kCoordinator && c->exit_code == Coordinator::kExitServerDead));
    const int consequence = reported || (c->hung && !(server_dead && c->role == NodeRole::kServer)) ? 1 : 0;
    const int role = c->role == NodeRole::kWorker   ? (server_dead ? 1 : 0)
                     : c->role == NodeRole::kServer ? (server_dead ? 0 : 1)
                                                    : 2;
    return consequence * 3 + role;
  };
  std::stable_sort(failed.begin(), failed.end(),
                   [&](const ChildExit* a, const ChildExit* b) { return order(a) < order(b); });
  return failed;
}

const ChildExit* likely_cause(const LocalJob::Result& r) {
  std::vector<const ChildExit*> failed = failures_by_cause(r);
  return failed.empty() ? nullptr : failed.front();
}

// The newest step of `dir` every server has a complete checkpoint of (-1: none); files that fail
// their check are named on stderr and skipped.
int64_t newest_resumable_step(const std::string& dir, uint32_t servers, const std::string& run_id) {
  std::vector<std::string> skipped;
  const int64_t step = newest_complete_step(dir, servers, run_id, &skipped);
  for (const std::string& why : skipped) std::fprintf(stderr, "[launch] skipping a checkpoint: %s\n", why.c_str());
  return step;
}

// --resume: the settings that fix what the checkpoints mean must be those of RUN_DIR/config.toml; an Error names
// the first one that differs (docs/OPERATIONS.md, "Resuming a run").
void check_resume_settings(const std::string& run_dir, const Config& now) {
  const std::string path = run_dir + "/config.toml";
  if (!std::filesystem::exists(path)) throw Error("pshard launch --resume: " + path + " is missing");
  const Config run = Config::from_file(path);
  const std::vector<FixedSettingChange> changes = fixed_setting_changes(run, now);
  if (changes.empty()) return;
  const FixedSettingChange& c = changes.front();
  std::string why = "the checkpoints' weights, optimizer state and learning-rate schedule were computed with it";
  if (c.key == "train.epochs") {
    why =
        "the learning-rate schedule and the checkpoints were computed for the run's length; to train longer, "
        "start a new run with the new train.epochs";
  }
  throw Error("pshard launch --resume: " + c.key + " = " + c.after + " differs from the run's " + c.key + " = " +
              c.before + " (" + path + ") and may not change on resume: " + why +
              ". The keys that may change are those `pshard config --list` marks \"may change\" on resume (how the "
              "run is run, logged, checkpointed and secured; docs/CONFIG.md)");
}

// One try of the job: what it runs and where (the coordinator's port, the servers' ports on this machine).
struct JobTry {
  JobPlan plan;
  std::vector<int> server_ports;  // here; empty with --hosts (the hosts bind their own)
  std::string security;           // for the start line: "job token", or CurveZMQ and its key file
  transport::CurveKeys keys;
};

JobTry plan_job(const LocalLaunchOptions& o, const Config& cfg, const std::string& config_path,
                const std::string& run_dir, const std::string& run_id, int64_t servers, int64_t workers,
                int64_t resume_step, bool remote) {
  // --hosts: the remote hosts bind their own ports (remote_job.h).
  std::vector<int> ports = remote ? std::vector<int>{0} : pick_free_ports(static_cast<int>(servers) + 1);
  const int coord_port = o.port > 0 ? o.port : ports[0];
  const bool elastic = o.max_workers > 0;
  JobTry t;
  JobPlan& plan = t.plan;
  plan.config_path = config_path;
  plan.overrides = o.overrides;
  if (elastic) plan.overrides.push_back("cluster.min_workers=" + std::to_string(workers));
  plan.run_dir = run_dir;
  plan.job_token = new_job_token();
  plan.run_id = run_id;
  plan.num_servers = static_cast<uint32_t>(servers);
  plan.num_workers = static_cast<uint32_t>(elastic ? o.max_workers : workers);
  plan.coordinator = "tcp://127.0.0.1:" + std::to_string(coord_port);
  plan.resume_step = resume_step;
  if (!o.server_exe.empty()) plan.server_command = {std::filesystem::absolute(o.server_exe).string()};
  if (!o.worker_exe.empty()) plan.worker_command = {std::filesystem::absolute(o.worker_exe).string()};
  plan.user_command = o.worker_program;
  // Every worker runs here: train.threads = 0 shares the cores among them (an elastic job's most workers).
  plan.workers_on_host = elastic ? o.max_workers : workers;
  if (JobShape::from_config(cfg).cuda() && !remote) {  // CUDA workers spread over the GPUs this launcher may use
    plan.worker_gpus = host_gpus(std::getenv("CUDA_VISIBLE_DEVICES"), count_nvidia_gpus());
  }
  t.security = "job token";
  if (cfg.get_bool("security.curve")) {  // keys before any process starts: every child reads them
    plan.key_dir = transport::curve_key_dir(cfg, o.key_dir, run_dir);
    t.keys = transport::ensure_curve_keys(plan.key_dir);
    t.security = "CurveZMQ, keys " + transport::curve_key_file(plan.key_dir);
  }
  if (!remote) t.server_ports.assign(ports.begin() + 1, ports.end());
  return t;
}

// The coordinator, the servers and the workers, as children of this process. Failure policy continue and elastic
// jobs let a worker fail; cluster.restart_workers starts a failed one again, which rejoins the running job.
void add_local_processes(LocalJob& job, const JobTry& t, const Config& cfg, int64_t workers) {
  const JobPlan& plan = t.plan;
  const JobShape shape = JobShape::from_config(cfg);
  const bool may_lose_workers = shape.may_lose_workers();
  const bool restart_workers = shape.restart_workers;
  job.add(plan.coordinator_process(plan.coordinator));
  for (size_t s = 0; s < t.server_ports.size(); ++s) {
    job.add(plan.server_process(static_cast<int64_t>(s), "tcp://127.0.0.1:" + std::to_string(t.server_ports[s])));
  }
  for (int64_t w = 0; w < workers; ++w) {
    ChildSpec c = plan.worker_process(w);
    c.may_fail = may_lose_workers;  // the coordinator decides
    if (!restart_workers) {
      job.add(c);
      continue;
    }
    job.add_restartable(c, plan.rejoining_worker(c), static_cast<int>(cfg.get_int("cluster.max_restarts")));
  }
}

// Runs the job to its end with a progress line from the coordinator's metrics.jsonl; `progress` keeps what it read
// (the summary among it).
LocalJob::Result run_with_progress(LocalJob& job, const std::string& run_dir, TerminalStatus& terminal,
                                   ProgressState& progress) {
  MetricsFollower follower(run_dir + "/metrics.jsonl");
  job.start();
  std::optional<LocalJob::Result> finished;
  while (!(finished = job.wait_for(std::chrono::milliseconds(250)))) {
    for (const Json& e : follower.poll()) progress.add(e);
    if (auto line = progress.line()) terminal.set("[progress] " + *line);
  }
  for (const Json& e : follower.poll()) progress.add(e);
  terminal.clear();
  return *finished;
}

// The launch's last words on a try of the job: how it ended and, when it trained to its end, the summary line.
void tell_how_it_ended(const LocalJob::Result& r, const ProgressState& progress, const std::string& run_dir) {
  for (const ChildExit& e : r.children) {
    if (e.failed() || e.after_success || e.dropped || e.unneeded)
      std::fprintf(stderr, "[launch] %s\n", e.describe().c_str());
  }
  const auto summary_line = [&progress, &run_dir] {
    if (!progress.summary().is_null()) std::printf("%s\n", format_summary_line(progress.summary(), run_dir).c_str());
  };
  if (r.exit_code == 0) {
    std::fprintf(stderr, "[launch] job finished: every process exited successfully\n");
    summary_line();
    return;
  }
  if (r.exit_code == kExitRecordsIncomplete) {
    std::fprintf(stderr, "[launch] job finished, but %s (a write to %s failed: see the error above)\n",
                 r.failure.c_str(), run_dir.c_str());
    return;
  }
  if (r.exit_code == kExitStopped) {
    std::fprintf(stderr,
                 "[launch] job stopped at a checkpoint on SIGTERM (exit status %d): pshard launch --resume %s "
                 "continues it\n",
                 kExitStopped, run_dir.c_str());
    return;
  }
  std::string headline;
  for (const ChildExit* c : failures_by_cause(r)) headline += (headline.empty() ? "" : "; ") + c->describe();
  if (headline.empty()) headline = r.failure;  // e.g. the job timed out
  // cluster.failure_policy = continue: the job ran to its end, without some workers (the coordinator names them).
  bool workers_lost = false;
  for (const ChildExit& c : r.children) {
    workers_lost =
        workers_lost || (c.role == NodeRole::kCoordinator && c.exited && c.exit_code == Coordinator::kExitWorkersLost);
  }
  if (workers_lost) {
    std::fprintf(stderr, "[launch] job finished, but not every worker did: %s\n", headline.c_str());
    summary_line();
    return;
  }
  std::fprintf(stderr, "[launch] job failed: %s\n", headline.c_str());
}

LocalJob::Result run_job_once(const LocalLaunchOptions& o, const Config& cfg, const std::string& config_path,
                              const std::string& run_dir, const std::string& run_id, int64_t servers, int64_t workers,
                              int64_t resume_step, const std::vector<remote::RemoteHost>& hosts,
                              TerminalStatus& terminal, std::string& server_failure) {
  if (resume_step >= 0) keep_metrics_before(run_dir, resume_step);
  const JobShape shape = JobShape::from_config(cfg);
  const bool elastic = o.max_workers > 0;  // --workers MIN:MAX (which sets cluster.min_workers = MIN)
  JobTry t = plan_job(o, cfg, config_path, run_dir, run_id, servers, workers, resume_step, !hosts.empty());
  // A process that dies here is dead for the coordinator at once, not after cluster.heartbeat_timeout_ms: under
  // failure_policy = continue the others go on without waiting that long (over ssh the children are the agents).
  std::unique_ptr<ProcessNotifier> notices;
  if (hosts.empty()) notices = std::make_unique<ProcessNotifier>(t.plan.coordinator, t.plan.job_token, t.keys);
  LocalJob::Options opt;
  if (notices) {
    opt.on_child_failed = [&notices](const ChildSpec& spec, const ChildExit& how) {
      if (!spec.rank || *spec.role == NodeRole::kCoordinator) return;
      notices->process_ended(*spec.role, static_cast<uint32_t>(*spec.rank), how.pid, how.ending());
    };
  }
  opt.handle_signals = true;
  opt.forward_sigterm = shape.checkpoint_on_sigterm;
  opt.drops_workers = elastic;
  opt.grace = o.grace;
  opt.timeout = o.timeout;
  opt.line_sink = [&terminal](int fd, const std::string& text) { terminal.print(fd, text); };
  LocalJob job(opt);
  std::vector<std::string> placement;
  if (!hosts.empty()) {
    remote::RemoteJobOptions ro;
    ro.hosts = hosts;
    ro.servers = servers;
    ro.port = o.port;
    ro.remote_pshard = o.remote_pshard.empty() ? self_executable() : o.remote_pshard;
    ro.ssh = remote::ssh_command(std::getenv("PSHARD_SSH"));
    ro.keys = t.keys;
    ro.assign_gpus = shape.cuda();
    ro.grace_ms = o.grace.count();
    ro.workers_may_fail = shape.may_lose_workers();
    ro.drops_workers = elastic;
    ro.max_worker_restarts = shape.restart_workers ? static_cast<int>(cfg.get_int("cluster.max_restarts")) : 0;
    placement = remote::add_host_processes(ro, t.plan, job);
  } else {
    add_local_processes(job, t, cfg, workers);
  }
  if (elastic) write_join_file(run_dir, t.plan);
  const std::string worker_count =
      std::to_string(workers) + (elastic ? " (elastic, up to " + std::to_string(o.max_workers) + ")" : "");
  std::fprintf(stderr, "[launch] job with %lld servers and %s workers, coordinator %s, run dir %s, security: %s%s\n",
               static_cast<long long>(servers), worker_count.c_str(), t.plan.coordinator.c_str(), run_dir.c_str(),
               t.security.c_str(),
               resume_step >= 0 ? (", resuming at step " + std::to_string(resume_step)).c_str() : "");
  for (const std::string& line : placement) std::fprintf(stderr, "[launch] host %s\n", line.c_str());
  ProgressState progress;
  LocalJob::Result r = run_with_progress(job, run_dir, terminal, progress);
  server_failure = progress.server_failure();
  // Nobody can join a job that ended: `pshard join` then says so instead of waiting for its coordinator.
  if (elastic) std::remove((run_dir + "/" + kJoinFile).c_str());
  tell_how_it_ended(r, progress, run_dir);
  return r;
}

// --workers MIN:MAX: what an elastic job cannot do (yet), refused before any process starts.
void check_elastic_settings(const LocalLaunchOptions& o) {
  const std::string what = "pshard launch --workers " + std::to_string(o.workers) + ":" +
                           std::to_string(o.max_workers) + " (an elastic job): ";
  if (!o.resume_dir.empty()) throw Error(what + "cannot be resumed: its epochs' members are not in its checkpoints");
}

// `-- CMD`: the program names the workers' executable. Where it starts comes from the environment: PSHARD_START_STEP
// (--resume, and a job restarted from a checkpoint after a server failed) and PSHARD_REJOIN (a worker restarted by
// cluster.restart_workers), docs/PYTHON.md.
void check_worker_program(const LocalLaunchOptions& o) {
  const std::string what = "pshard launch -- " + o.worker_program.front() + ": ";
  if (!o.worker_exe.empty()) throw Error(what + "--worker-exe and a command after -- both name the workers' program");
}

// The job's size: --servers and --workers, or with --hosts the hosts' workers and by default one server per host.
// Every option that goes with another is checked here, before anything is read or started.
std::pair<int64_t, int64_t> job_size(const LocalLaunchOptions& o, const std::vector<remote::RemoteHost>& hosts) {
  int64_t servers = o.servers, workers = o.workers;
  if (!hosts.empty()) {
    int64_t on_hosts = 0;
    for (const remote::RemoteHost& h : hosts) on_hosts += h.workers;
    if (workers != 0 && workers != on_hosts) {
      throw Error("pshard launch: --workers " + std::to_string(workers) + " differs from the " +
                  std::to_string(on_hosts) + " workers of --hosts " + o.hosts + " (leave --workers out)");
    }
    workers = on_hosts;
    if (servers == 0) servers = static_cast<int64_t>(hosts.size());
    remote::check_placement(hosts, servers);
  }
  if (servers < 1 || servers > 1024)
    throw Error("pshard launch: --servers must be in 1..1024, got " + std::to_string(servers));
  if (workers < 1 || workers > 1024)
    throw Error("pshard launch: --workers must be in 1..1024, got " + std::to_string(workers));
  if (!o.resume_dir.empty() && !o.run_dir.empty() &&
      std::filesystem::absolute(o.resume_dir) != std::filesystem::absolute(o.run_dir)) {
    throw Error("pshard launch: --resume " + o.resume_dir + " and --run-dir " + o.run_dir +
                " differ: a resumed run continues in its own directory");
  }
  if (o.config_path.empty() && o.resume_dir.empty()) throw Error("pshard launch: --config FILE is required");
  if (o.start_over && !o.resume_dir.empty()) {
    throw Error("pshard launch: --start-over starts a new run; it does not go with --resume");
  }
  return {servers, workers};
}

// The config with its overrides, checked here before any process starts (the config's own rules: config.cc).
Config checked_config(const LocalLaunchOptions& o, const std::string& config_path) {
  std::vector<std::string> overrides = o.overrides;
  if (o.max_workers > 0) overrides.push_back("cluster.min_workers=" + std::to_string(o.workers));
  Config cfg = Config::from_file(config_path, overrides);
  if (o.max_workers > 0) check_elastic_settings(o);
  if (!o.worker_program.empty()) check_worker_program(o);
  (void)TraceWindow::parse(cfg.get_string("trace.steps"), "trace.steps");  // a bad window fails here
  return cfg;
}

// The run directory this launch holds: --resume's (its run id, and the newest step every server has a complete
// checkpoint of) or a new one (claimed, with a new run id).
struct OpenRun {
  std::string dir;
  std::string run_id;
  RunDirClaim claim;         // held until the launch returns: a second launch in the same directory is refused
  int64_t resume_step = -1;  // -1: a fresh start
};

OpenRun open_run(const LocalLaunchOptions& o, const Config& cfg, int64_t servers) {
  OpenRun run;
  if (o.resume_dir.empty()) {
    NewRunDir chosen = claim_new_run_dir(o.run_dir, cfg.get_string("run.name"), o.start_over, "pshard launch",
                                         "`pshard launch --resume " + without_trailing_slash(o.run_dir) + "`");
    run.dir = std::filesystem::absolute(chosen.path).string();
    run.claim = std::move(chosen.claim);
    if (!chosen.moved_to.empty()) {
      std::fprintf(stderr, "[launch] --start-over: moved the old run to %s\n", chosen.moved_to.c_str());
    }
    std::printf("run directory: %s\n", run.dir.c_str());
    std::fflush(stdout);
    run.run_id = new_run_id();
    write_run_id(run.dir, run.run_id);
    return run;
  }
  run.dir = std::filesystem::absolute(without_trailing_slash(o.resume_dir)).string();
  if (!std::filesystem::is_directory(run.dir)) throw Error("pshard launch --resume: no run directory " + run.dir);
  run.claim = RunDirClaim::take(run.dir, "pshard launch --resume");
  run.run_id = read_run_id(run.dir);
  if (run.run_id.empty()) {
    throw Error("pshard launch --resume: " + run.dir + "/" + kRunIdFile +
                " is missing: the directory was not made by this pshard's launch (checkpoints without a run id "
                "cannot be resumed)");
  }
  check_resume_settings(run.dir, cfg);
  run.resume_step = newest_resumable_step(run.dir + "/checkpoints", static_cast<uint32_t>(servers), run.run_id);
  if (run.resume_step < 0) {
    throw Error("pshard launch --resume: " + run.dir + "/checkpoints holds no checkpoint of run " + run.run_id +
                " that all " + std::to_string(servers) + " servers have completely (was checkpoint.every_steps > " +
                "0, and is --servers the same as in the run?)");
  }
  return run;
}

}  // namespace

int run_local_launch(const LocalLaunchOptions& o) {
  const std::vector<remote::RemoteHost> hosts =
      o.hosts.empty() ? std::vector<remote::RemoteHost>{} : remote::parse_hosts(o.hosts);
  const auto [servers, workers] = job_size(o, hosts);
  const std::string config_path =
      std::filesystem::absolute(!o.config_path.empty() ? o.config_path : o.resume_dir + "/config.toml").string();
  const Config cfg = checked_config(o, config_path);
  if (const JobShape shape = JobShape::from_config(cfg);
      shape.uneven_batches() && static_cast<int64_t>(shape.worker_batches.size()) != workers) {
    throw Error("pshard launch: train.worker_batch_sizes names " + std::to_string(shape.worker_batches.size()) +
                " batches, but the job has " + std::to_string(workers) + " workers: give one a worker");
  }
  OpenRun run = open_run(o, cfg, servers);
  const std::string& run_dir = run.dir;
  const std::string& run_id = run.run_id;
  int64_t resume_step = run.resume_step;
  const std::string checkpoint_dir = run_dir + "/checkpoints";
  write_run_config(run_dir, cfg);
  if (o.on_run_dir) {
    try {
      o.on_run_dir(run_dir);
    } catch (const Error&) {
      if (o.resume_dir.empty()) give_back_untrained_run_dir(run_dir);
      throw;
    }
  }
  const bool restart_servers = JobShape::from_config(cfg).restart_servers;
  const int64_t max_restarts = cfg.get_int("cluster.max_restarts");
  int64_t restarts = 0;
  if (restart_servers && cfg.get_int("checkpoint.every_steps") == 0) {
    std::fprintf(stderr,
                 "[launch] warning: cluster.server_failure_policy = restart without checkpoint.every_steps: a "
                 "restarted job starts over from step 0\n");
  }
  TerminalStatus terminal(STDERR_FILENO, ::isatty(STDERR_FILENO) == 1);
  for (;;) {
    LocalJob::Result r;
    std::string server_failure;  // the coordinator's record of a server's death
    try {
      r = run_job_once(o, cfg, config_path, run_dir, run_id, servers, workers, resume_step, hosts, terminal,
                       server_failure);
    } catch (const Error&) {
      // Refused before any process started (e.g. a key directory others may read): a new run leaves its directory
      // as it found it, so that the corrected command may use it.
      if (o.resume_dir.empty()) give_back_untrained_run_dir(run_dir);
      throw;
    }
    // Success, records incomplete (the job itself finished) or Ctrl-C: nothing to restart.
    if (r.exit_code == 0 || r.exit_code == kExitRecordsIncomplete || r.exit_code == kExitStopped || r.exit_code > 128)
      return r.exit_code;
    const ChildExit* cause = likely_cause(r);
    // Over ssh the first host to fail may be one whose processes only followed the abort, and the launcher stops the
    // others before their statuses say a server died: the coordinator's record says so.
    const bool server_named = cause != nullptr && (cause->role == NodeRole::kServer ||
                                                   (cause->exited && cause->exit_code == Coordinator::kExitServerDead));
    const bool server_died = server_named || server_declared_dead(r) || !server_failure.empty();
    if (!server_died || !restart_servers || restarts >= max_restarts) {
      if (server_died && restart_servers) {
        std::fprintf(stderr, "[launch] not restarting: cluster.max_restarts = %lld restarts used\n",
                     static_cast<long long>(max_restarts));
      }
      // Refused by its processes before the first step (a batch larger than the data set, say): the new run gives
      // its directory back for the corrected command.
      if (o.resume_dir.empty() && give_back_untrained_run_dir(run_dir)) {
        std::fprintf(stderr, "[launch] the job trained nothing: %s is left as it was found\n", run_dir.c_str());
      }
      return r.exit_code;
    }
    ++restarts;
    resume_step = newest_resumable_step(checkpoint_dir, static_cast<uint32_t>(servers), run_id);
    const std::string why =
        server_named || server_failure.empty() ? (cause ? cause->describe() : "a server died") : server_failure;
    std::fprintf(stderr, "[launch] %s: restarting the job (restart %lld of %lld) from %s\n", why.c_str(),
                 static_cast<long long>(restarts), static_cast<long long>(max_restarts),
                 resume_step >= 0 ? ("the checkpoint of step " + std::to_string(resume_step)).c_str()
                                  : "step 0 (no complete checkpoint yet)");
  }
}

}  // namespace pshard
