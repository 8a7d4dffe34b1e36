// One task of a parallel launch: placement, rendezvous file, then the role's process (see
// scheduled_task.h and docs/SLURM.md).
#include "launcher/scheduler/scheduled_task.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "common/checkpoint/checkpoint_file.h"
#include "common/config/config.h"
#include "common/config/job_shape.h"
#include "common/control/coordinator.h"
#include "common/control/process_notice.h"
#include "common/error.h"
#include "common/metrics/metrics_writer.h"
#include "common/run/run_directory.h"
#include "common/transport/curve.h"
#include "common/util/binary_file.h"
#include "common/util/host.h"
#include "common/util/json.h"
#include "launcher/job_plan.h"
#include "launcher/join_job.h"
#include "launcher/local_job.h"
#include "launcher/scheduler/node_address.h"

namespace pshard::scheduler {
namespace {

// What task 0 tells the others through the shared run directory: the job token (unless every task
// has PSHARD_JOB_TOKEN) and the coordinator's endpoint (unless every task can work it out from the
// node list). Mode 0600: the token is a secret.
struct Rendezvous {
  std::string token;
  std::string coordinator;
};

std::string rendezvous_text(const Rendezvous& r) {
  return "token " + r.token + "\ncoordinator " + r.coordinator + "\n";
}

// Waits for task 0's file. A file whose token is not `expected_token` (when given) is a leftover of
// another launch and is waited past.
Rendezvous wait_for_rendezvous(const std::string& path, const std::string& expected_token,
                               std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream in(path);
    Rendezvous r;
    for (std::string line; in && std::getline(in, line);) {
      if (line.rfind("token ", 0) == 0) r.token = line.substr(6);
      if (line.rfind("coordinator ", 0) == 0) r.coordinator = line.substr(12);
    }
    if (r.token.size() == 32 && !r.coordinator.empty() && (expected_token.empty() || r.token == expected_token)) {
      return r;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error("no rendezvous: " + path + " (written by task 0) did not appear within " +
                  std::to_string(timeout.count()) +
                  " ms. Is the run directory on a file system all nodes share, and did task 0 start? (Or export "
                  "PSHARD_JOB_TOKEN and, under mpirun, pass --coordinator-host; see docs/SLURM.md)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// security.curve: task 0 creates the key file if it is missing; the others wait for it (shared run directory).
void wait_for_key_file(const std::string& key_dir, std::chrono::milliseconds timeout) {
  const std::string path = transport::curve_key_file(key_dir);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error("no CurveZMQ key file: " + path + " (created by task 0 on the first node) did not appear within " +
                  std::to_string(timeout.count()) +
                  " ms. Is the key directory on a filesystem all nodes share? Set security.key_dir or --key-dir");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  transport::read_curve_keys(key_dir);  // refuses a file others can read, before any process starts
}

// cluster.server_failure_policy = restart, after a job of this launch ended in failure: does it start again, and
// from which checkpoint step (-1: step 0)? Task 0 decides, since its coordinator says why the job ended (a dead
// server: kExitServerDead), and writes "restart K" or "end" into `outcome_file` in the shared run directory; the
// other tasks wait for that file (up to `wait`). nullopt: the job ends.
std::optional<int64_t> restart_decision(const std::string& outcome_file, const TaskPlan& plan,
                                        const LocalJob::Result& r, int64_t round, int64_t max_restarts,
                                        const std::string& run_dir, std::chrono::milliseconds wait) {
  if (plan.runs_coordinator) {
    bool server_dead = false;
    for (const ChildExit& e : r.children) {
      server_dead =
          server_dead || (e.role == NodeRole::kCoordinator && e.exited && e.exit_code == Coordinator::kExitServerDead);
    }
    std::optional<int64_t> step;
    if (server_dead && round < max_restarts) {
      std::vector<std::string> skipped;
      step = newest_complete_step(run_dir + "/checkpoints", plan.num_servers, read_run_id(run_dir), &skipped);
      for (const std::string& why : skipped) std::fprintf(stderr, "[task] skipping a checkpoint: %s\n", why.c_str());
    } else if (server_dead) {
      std::fprintf(stderr, "[task] not restarting: cluster.max_restarts = %lld restarts used\n",
                   static_cast<long long>(max_restarts));
    }
    binary::write_file_atomically(outcome_file, step ? "restart " + std::to_string(*step) + "\n" : "end\n",
                                  "restart decision", 0644);
    return step;
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(outcome_file);
    std::string word;
    int64_t step = -1;
    if (in >> word) {
      if (word == "restart" && in >> step) return step;
      if (word == "end") return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::fprintf(stderr, "[task] task 0 did not say within %lld ms whether the job starts again (%s): ending\n",
               static_cast<long long>(wait.count()), outcome_file.c_str());
  return std::nullopt;
}

// Where this task's processes find each other: the coordinator's port and endpoint (when every task can tell
// without asking task 0), the address this task advertises, its run directory and its GPU.
struct TaskPlace {
  int port = 0;
  std::string address;      // servers and task 0: the address they bind and advertise
  std::string coordinator;  // "" when task 0 must say it (through the rendezvous file)
  std::string run_dir;
  std::string gpu;  // a worker's CUDA_VISIBLE_DEVICES ("" = unset)
};

TaskPlace place_task(const ScheduledTaskOptions& o, const Config& cfg, const TaskEnv& env, const TaskPlan& plan) {
  TaskPlace p;
  p.port = o.port > 0 ? o.port : coordinator_port(env.job_id, env.step_id);
  // Servers bind their advertised address, and task 0 advertises the coordinator's: check both now, with errors
  // that say what to do.
  if (plan.role == NodeRole::kServer || plan.runs_coordinator) p.address = advertised_address(plan.node, o.iface);
  if (!o.coordinator_host.empty()) {
    p.coordinator = "tcp://" + resolve_ipv4(o.coordinator_host) + ":" + std::to_string(p.port);
  } else if (!plan.first_node.empty()) {
    p.coordinator = "tcp://" + resolve_ipv4(plan.first_node) + ":" + std::to_string(p.port);
  } else if (plan.runs_coordinator) {
    p.coordinator = "tcp://" + p.address + ":" + std::to_string(p.port);
  }
  p.run_dir = std::filesystem::absolute(o.run_dir.empty() ? "runs/" + cfg.get_string("run.name") : o.run_dir).string();
  p.gpu = plan.role == NodeRole::kWorker ? worker_gpu(env, plan.local_role_index) : "";
  return p;
}

// --dry-run: the task's plan as one JSON line, nothing started.
void print_plan(const TaskEnv& env, const TaskPlan& plan, const TaskPlace& place) {
  Json j = Json::object()
               .set("scheduler", scheduler_name(env.scheduler))
               .set("proc_id", env.proc_id)
               .set("node", plan.node)
               .set("role", role_name(plan.role))
               .set("rank", plan.rank)
               .set("num_servers", static_cast<int64_t>(plan.num_servers))
               .set("num_workers", static_cast<int64_t>(plan.num_workers))
               .set("runs_coordinator", plan.runs_coordinator)
               .set("coordinator", place.coordinator)
               .set("address", place.address)
               .set("cuda_visible_devices", place.gpu)
               .set("run_dir", place.run_dir);
  std::printf("%s\n", j.dump().c_str());
}

// The run directory, as this task finds it: a requeued job (SLURM_RESTART_COUNT > 0, e.g. after it stopped at a
// checkpoint on SIGTERM: exit status 75) continues its run from the newest checkpoint every server has completely
// (every task reads the same files, so they agree on the step without asking each other); else task 0 claims it for
// a new run. Returns the step to resume at, -1 for a fresh start.
int64_t open_run_dir(const std::string& run_dir, const Config& cfg, const TaskEnv& env, const TaskPlan& plan) {
  int64_t resume_step = -1;
  const std::string resumed_run_id = env.restart_count > 0 ? read_run_id(run_dir) : "";
  if (!resumed_run_id.empty()) {
    std::vector<std::string> skipped;
    resume_step = newest_complete_step(run_dir + "/checkpoints", plan.num_servers, resumed_run_id, &skipped);
    for (const std::string& why : skipped) std::fprintf(stderr, "[task] skipping a checkpoint: %s\n", why.c_str());
  }
  if (resume_step >= 0) {
    std::fprintf(stderr, "[task] requeued (SLURM_RESTART_COUNT=%lld): resuming run %s at step %lld\n",
                 static_cast<long long>(env.restart_count), run_dir.c_str(), static_cast<long long>(resume_step));
    if (plan.runs_coordinator) keep_metrics_before(run_dir, resume_step);
  } else if (plan.runs_coordinator) {
    // A run directory belongs to one run. Tasks cannot agree on a fresh directory or on moving an old run aside, so
    // task 0 refuses one that holds a run, before anything starts; the other tasks then end at their rendezvous
    // timeout.
    const std::vector<std::string> files = run_files_in(run_dir);
    if (!files.empty()) {
      std::string names;
      for (const std::string& f : files) names += (names.empty() ? "" : ", ") + f;
      throw Error("pshard task: the run directory " + run_dir + " already holds a run (" + names +
                  "): give every task a fresh --run-dir (e.g. runs/<name>-$SLURM_JOB_ID), or move the old one aside; "
                  "the other tasks stop at their rendezvous timeout");
    }
  }
  make_directories(run_dir);  // an Error naming the path (not "filesystem error") when it is a file
  if (plan.runs_coordinator && resume_step < 0) {
    write_run_id(run_dir, new_run_id());  // servers read it after the rendezvous (no PSHARD_RUN_ID here)
    write_run_config(run_dir, cfg);
  }
  return resume_step;
}

// One round of the job (the first, then one per restart after a server died), met at its own rendezvous file:
// the token and the coordinator (from the environment, or task 0's file), the job's keys, then this task's
// processes under a LocalJob until they end.
LocalJob::Result run_round(const ScheduledTaskOptions& o, const Config& cfg, const TaskEnv& env, const TaskPlan& plan,
                           const TaskPlace& place, JobPlan& job_plan, const std::string& launch,
                           const std::string& given_token) {
  const auto wait_limit = std::chrono::milliseconds(cfg.get_int("cluster.rendezvous_timeout_ms"));
  std::string rendezvous_file;
  job_plan.coordinator = place.coordinator;
  if (given_token.empty() || place.coordinator.empty()) {
    rendezvous_file = place.run_dir + "/.pshard-rendezvous-" + launch;
    if (plan.runs_coordinator) {
      const Rendezvous r{given_token.empty() ? new_job_token() : given_token, place.coordinator};
      binary::write_file_atomically(rendezvous_file, rendezvous_text(r), "rendezvous file", 0600);
      job_plan.job_token = r.token;
    } else {
      const Rendezvous r = wait_for_rendezvous(rendezvous_file, given_token, wait_limit);
      job_plan.job_token = r.token;
      job_plan.coordinator = r.coordinator;
    }
  } else {
    job_plan.job_token = given_token;
  }
  if (cfg.get_bool("security.curve")) {
    job_plan.key_dir = transport::curve_key_dir(cfg, o.key_dir, place.run_dir);
    if (plan.runs_coordinator) {
      transport::ensure_curve_keys(job_plan.key_dir);
    } else {
      wait_for_key_file(job_plan.key_dir, wait_limit);
    }
  }

  const JobShape shape = JobShape::from_config(cfg);
  LocalJob::Options opt;
  opt.handle_signals = true;  // scancel / srun's / mpirun's SIGTERM stop this task's processes
  // checkpoint.on_sigterm = checkpoint: they decide instead (the workers stop at the next step boundary; exit 75).
  opt.forward_sigterm = shape.checkpoint_on_sigterm;
  opt.grace = o.grace;
  // A process of this task that dies is dead for the coordinator at once, as pshard launch tells it of its own
  // children: under failure_policy = continue the others go on without waiting for the heartbeat timeout.
  const transport::CurveKeys keys =
      job_plan.key_dir.empty() ? transport::CurveKeys{} : transport::read_curve_keys(job_plan.key_dir);
  ProcessNotifier notices(job_plan.coordinator, job_plan.job_token, keys);
  opt.on_child_failed = [&notices](const ChildSpec& spec, const ChildExit& how) {
    if (!spec.role || *spec.role == NodeRole::kCoordinator) return;
    notices.process_ended(*spec.role,
                          spec.rank ? std::optional<uint32_t>(static_cast<uint32_t>(*spec.rank)) : std::nullopt,
                          how.pid, how.ending());
  };
  LocalJob job(opt);
  if (plan.runs_coordinator) job.add(job_plan.coordinator_process("tcp://0.0.0.0:" + std::to_string(place.port)));
  ChildSpec c = plan.role == NodeRole::kServer ? job_plan.server_process(plan.rank, "tcp://" + place.address + ":0")
                                               : job_plan.worker_process(plan.rank, {}, plan.local_role_index);
  if (!place.gpu.empty()) c.env.push_back("CUDA_VISIBLE_DEVICES=" + place.gpu);
  if (plan.role == NodeRole::kWorker) c.may_fail = shape.may_lose_workers();  // the coordinator decides
  if (plan.role == NodeRole::kWorker && shape.restart_workers) {
    // cluster.restart_workers: started again in this task, on its node, it rejoins the running job.
    job.add_restartable(c, job_plan.rejoining_worker(c), static_cast<int>(cfg.get_int("cluster.max_restarts")));
  } else {
    job.add(c);
  }

  // An elastic job: how `pshard join RUN_DIR` adds a worker, from any node, while this round runs.
  const bool joinable = plan.runs_coordinator && o.max_workers > 0;
  if (joinable) write_join_file(place.run_dir, job_plan);
  const std::string rank = plan.rank >= 0 ? std::to_string(plan.rank) : "(assigned by the coordinator)";
  std::fprintf(
      stderr, "[task] %s task %lld/%lld on %s: %s %s (%u servers, %u workers%s%s), coordinator %s%s%s, run dir %s\n",
      scheduler_name(env.scheduler), static_cast<long long>(env.proc_id), static_cast<long long>(env.num_tasks),
      plan.node.c_str(), role_name(plan.role), rank.c_str(), plan.num_servers, plan.num_workers,
      o.max_workers > 0 ? (" (elastic, up to " + std::to_string(o.max_workers) + ")").c_str() : "",
      plan.runs_coordinator ? ", runs the coordinator" : "", job_plan.coordinator.c_str(),
      place.address.empty() ? "" : ", address ", place.address.c_str(), place.run_dir.c_str());
  LocalJob::Result r = job.run();
  if (plan.runs_coordinator && !rendezvous_file.empty()) ::unlink(rendezvous_file.c_str());
  if (joinable) ::unlink((place.run_dir + "/" + kJoinFile).c_str());
  for (const ChildExit& e : r.children) {
    if (e.failed())
      std::fprintf(stderr, "[task] task %lld: %s\n", static_cast<long long>(env.proc_id), e.describe().c_str());
  }
  return r;
}

}  // namespace

int run_scheduled_task(const ScheduledTaskOptions& o, const Getenv& getenv) {
  const std::string config_path = std::filesystem::absolute(o.config_path).string();
  TaskEnv env = TaskEnv::read(getenv, o.scheduler);
  if (env.node_name.empty()) env.node_name = host_name();
  const TaskPlan plan = plan_task(env, o.placement);
  std::vector<std::string> overrides = o.overrides;
  if (o.max_workers > 0) {
    // An elastic job: the worker tasks are its fewest workers (as --workers MIN:MAX of pshard launch), and the
    // config's rules for elastic jobs apply.
    if (o.max_workers < static_cast<int64_t>(plan.num_workers)) {
      throw Error("pshard task: --max-workers " + std::to_string(o.max_workers) + " is below the " +
                  std::to_string(plan.num_workers) + " worker tasks of the step (the job's fewest workers)");
    }
    overrides.push_back("cluster.min_workers=" + std::to_string(plan.num_workers));
  }
  const Config cfg = Config::from_file(config_path, overrides);
  const TaskPlace place = place_task(o, cfg, env, plan);
  if (o.dry_run) {
    print_plan(env, plan, place);
    return 0;
  }
  const int64_t resume_step = open_run_dir(place.run_dir, cfg, env, plan);
  JobPlan job_plan;
  job_plan.config_path = config_path;
  job_plan.overrides = overrides;
  job_plan.run_dir = place.run_dir;
  job_plan.num_servers = plan.num_servers;
  job_plan.num_workers = o.max_workers > 0 ? static_cast<uint32_t>(o.max_workers) : plan.num_workers;
  job_plan.user_command = o.worker_program;
  job_plan.resume_step = resume_step;
  const char* env_token = getenv("PSHARD_JOB_TOKEN");
  const std::string given_token = env_token != nullptr ? env_token : "";
  const bool restart_servers = JobShape::from_config(cfg).restart_servers;
  const int64_t max_restarts = cfg.get_int("cluster.max_restarts");
  const auto wait_limit = std::chrono::milliseconds(cfg.get_int("cluster.rendezvous_timeout_ms"));
  for (int64_t round = 0;; ++round) {
    const std::string launch = env.launch_id + (round > 0 ? "-restart-" + std::to_string(round) : "");
    const LocalJob::Result r = run_round(o, cfg, env, plan, place, job_plan, launch, given_token);
    if (!restart_servers || r.exit_code == 0 || r.exit_code == kExitRecordsIncomplete || r.exit_code == kExitStopped ||
        r.exit_code > 128) {
      return r.exit_code;
    }
    // cluster.server_failure_policy = restart: whether the job starts again is task 0's decision (its coordinator
    // knows why the job ended), written into the run directory for the other tasks.
    const std::optional<int64_t> again = restart_decision(place.run_dir + "/.pshard-outcome-" + launch, plan, r, round,
                                                          max_restarts, place.run_dir, wait_limit);
    if (!again) return r.exit_code;
    std::fprintf(stderr, "[task] a server died: restarting the job (restart %lld of %lld) from %s\n",
                 static_cast<long long>(round + 1), static_cast<long long>(max_restarts),
                 *again >= 0 ? ("the checkpoint of step " + std::to_string(*again)).c_str()
                             : "step 0 (no complete checkpoint yet)");
    job_plan.resume_step = *again;
    if (plan.runs_coordinator && *again >= 0) keep_metrics_before(place.run_dir, *again);
  }
}

}  // namespace pshard::scheduler
