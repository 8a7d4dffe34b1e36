// A job's shape read from its config, and the rules about keys that are only wrong together.
#include "common/config/job_shape.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "common/config/config.h"
#include "common/config/config_errors.h"
#include "common/error.h"
#include "common/metrics/trace.h"

namespace pshard {
namespace {

[[noreturn]] void fail(const std::string& origin, const std::string& key, const std::string& why) {
  config_fail(origin, key, why);
}

std::string format_double(double v) { return config_double_text(v); }

JobMode mode_from_name(const std::string& name) {
  if (name == "async") return JobMode::kAsync;
  if (name == "ssp") return JobMode::kSsp;
  return JobMode::kSync;  // the schema admits sync, async and ssp only
}

// At most this many values in one synthetic image (64 MiB of float32): a larger sample cannot be a batch's.
constexpr int64_t kMaxSampleValues = int64_t{1} << 24;

// An elastic job (cluster.min_workers > 0, which pshard launch --workers MIN:MAX sets) changes its members between
// epochs: what needs a fixed membership, or a checkpoint of who trained, is refused for it.
void check_elastic(const JobShape& s, const std::string& origin) {
  const std::string job = " in an elastic job (cluster.min_workers > 0, pshard launch --workers MIN:MAX)";
  if (!s.sync()) {
    fail(origin, "cluster.mode",
         std::string("'") + s.mode_name() + "'" + job +
             ": it needs cluster.mode = sync: async and SSP workers already train with whichever workers push, so "
             "add or drop workers there with a fixed --workers and cluster.failure_policy = continue");
  }
  if (s.loss_scaling != "none") {
    fail(origin, "train.loss_scaling",
         "'" + s.loss_scaling + "'" + job +
             ": a worker joining it would start from a loss scale of its own; use a fixed --workers, or "
             "train.loss_scaling = none");
  }
  if (s.restart_workers) {
    fail(origin, "cluster.restart_workers",
         "true" + job +
             ": cluster.restart_workers is for a fixed number of workers: here a new worker joins "
             "instead (pshard join)");
  }
  for (const auto& [set, key, value] :
       {std::tuple<bool, const char*, const char*>{s.restart_servers, "cluster.server_failure_policy", "restart"},
        {s.checkpoint_on_sigterm, "checkpoint.on_sigterm", "checkpoint"}}) {
    if (set) {
      fail(origin, key,
           std::string("'") + value + "'" + job +
               ": it resumes the job from a checkpoint, which an elastic job cannot do (its epochs' members are not "
               "in its checkpoints)");
    }
  }
}

void check_host_aggregation(const JobShape& s, const std::string& origin) {
  if (s.host_aggregation != "always") return;
  std::string needs;
  for (const std::string& n : s.host_aggregation_needs()) needs += (needs.empty() ? "" : ", ") + n;
  if (!needs.empty()) {
    fail(origin, "cluster.host_aggregation",
         "always needs " + needs +
             " (a host's sum counts for all its workers in one sync step, each worker's own "
             "state aside)");
  }
}

// Per-worker batches (train.worker_batch_sizes) weigh each worker's gradients by its batch in a sync step's mean,
// with the weights of a fixed set of workers: every worker of the job pushes every step.
void check_worker_batches(const JobShape& s, const std::string& origin) {
  if (!s.uneven_batches()) return;
  const std::string key = "train.worker_batch_sizes";
  if (!s.sync()) {
    fail(origin, key,
         std::string("per-worker batches need cluster.mode = sync, not ") + s.mode_name() +
             ": a sync step's mean weighs each worker's gradients by its batch; async and SSP servers apply each "
             "push alone");
  }
  if (s.elastic()) {
    fail(origin, key,
         "per-worker batches need a fixed number of workers, not an elastic job (cluster.min_workers > 0): each "
         "entry is one worker's");
  }
  if (s.continue_without_dead_workers) {
    fail(origin, key,
         "per-worker batches need cluster.failure_policy = abort: the weights of a step's mean are those of every "
         "worker, which a job that goes on without one would get wrong");
  }
}

// Backup workers close a sync step without its last pushes: what needs every worker's push in every step is refused
// with them.
void check_backup_workers(const JobShape& s, const std::string& origin) {
  if (s.backup_workers == 0) return;
  const std::string key = "cluster.backup_workers";
  if (!s.sync()) {
    fail(origin, key,
         std::string("backup workers need cluster.mode = sync, not ") + s.mode_name() +
             ": async and SSP servers apply each push on its own and never wait for a straggler's");
  }
  if (s.elastic()) {
    fail(origin, key, "backup workers need a fixed number of workers, not an elastic job (cluster.min_workers > 0)");
  }
  if (s.uneven_batches()) {
    fail(origin, key,
         "backup workers cannot be used with train.worker_batch_sizes: each worker's gradients are weighed for a "
         "mean over every worker, which a step closed without one would get wrong");
  }
  if (s.loss_scaling != "none") {
    fail(origin, key,
         "backup workers cannot be used with train.loss_scaling = " + s.loss_scaling +
             ": a step is skipped for all when any worker's push says its gradients were not finite, which needs "
             "every worker's push");
  }
}

// Dynamic batch assignment hands each epoch's batches to whichever worker asks next: each worker trains as many steps
// as its speed gives it, which only an async job takes as it comes. (Elastic jobs, per-worker batches and restarted
// workers need a sync job, so they are refused with it already.)
void check_batch_assignment(const JobShape& s, const std::string& origin) {
  if (!s.dynamic_batches || s.mode == JobMode::kAsync) return;
  fail(origin, "cluster.batch_assignment",
       std::string("dynamic needs cluster.mode = async, not ") + s.mode_name() +
           (s.sync() ? ": a sync step needs a push of every worker, so every worker trains the same steps"
                     : ": SSP holds a worker that runs cluster.staleness steps ahead, so a faster worker could not "
                       "take more of the batches"));
}

// model.name = dlrm keeps its embedding tables on the servers; what re-runs, skips or drops a step's dense part alone
// would leave its rows behind.
void check_server_tables(const Config& cfg, const JobShape& s, const std::string& origin) {
  if (cfg.get_string("model.name") != "dlrm") return;
  const std::string why = ": model dlrm's embedding rows are pulled and pushed once a step, which ";
  if (s.loss_scaling != "none") {
    fail(origin, "train.loss_scaling", s.loss_scaling + why + "a step skipped by loss scaling would leave behind");
  }
  if (s.backup_workers > 0) {
    fail(origin, "cluster.backup_workers",
         std::to_string(s.backup_workers) + why + "a late worker catching up would leave behind; set it to 0");
  }
  if (s.elastic()) {
    fail(origin, "cluster.min_workers",
         std::to_string(s.min_workers) + why + "a change of members between epochs would leave behind; set it to 0");
  }
}

// A worker that cluster.restart_workers starts again rejoins the running sync job: the job must go on without it
// meanwhile.
void check_restart_workers(const JobShape& s, const std::string& origin) {
  if (!s.restart_workers || s.elastic()) return;  // an elastic job refuses it above, saying why
  if (!s.continue_without_dead_workers || !s.sync()) {
    fail(origin, "cluster.restart_workers",
         "true needs cluster.failure_policy = continue and cluster.mode = sync (a restarted worker rejoins the "
         "running sync job)");
  }
}

}  // namespace

// What each key's own range cannot say: values that are only wrong together.
void check_job_rules(const Config& cfg, const std::string& origin) {
  const JobShape s = JobShape::from_config(cfg);
  if (cfg.get_string("lr_schedule.name") == "cosine" &&
      cfg.get_double("lr_schedule.min_lr") > cfg.get_double("optimizer.lr")) {
    fail(origin, "lr_schedule.min_lr",
         format_double(cfg.get_double("lr_schedule.min_lr")) + " is above optimizer.lr = " +
             format_double(cfg.get_double("optimizer.lr")) + ": the cosine schedule decays from lr down to min_lr");
  }
  // An elastic job (pshard launch --workers MIN:MAX sets cluster.min_workers) has no length in steps before it runs:
  // who trains each epoch decides it.
  if (s.elastic() && cfg.get_string("lr_schedule.name") == "cosine" && cfg.get_int("lr_schedule.total_steps") == 0) {
    fail(origin, "lr_schedule.total_steps",
         "0 (the run's length) with a cosine schedule in an elastic job (cluster.min_workers > 0, pshard launch "
         "--workers MIN:MAX): its length in steps depends on who trains each epoch; set lr_schedule.total_steps, or "
         "use another lr_schedule.name");
  }
  if (!s.sync()) {
    // Checkpoints are taken at step boundaries, which only a sync job's servers share.
    if (cfg.get_int("checkpoint.every_steps") > 0 || cfg.get_double("checkpoint.every_seconds") > 0) {
      fail(origin, cfg.get_int("checkpoint.every_steps") > 0 ? "checkpoint.every_steps" : "checkpoint.every_seconds",
           std::string("a periodic checkpoint needs cluster.mode = sync, not ") + s.mode_name() +
               " (checkpoints are taken at step boundaries)");
    }
    if (s.checkpoint_on_sigterm) {
      fail(origin, "checkpoint.on_sigterm",
           std::string("checkpoint needs cluster.mode = sync, not ") + s.mode_name() +
               " (the job stops at a step boundary that every server checkpoints)");
    }
  }
  if (s.elastic()) check_elastic(s, origin);
  check_worker_batches(s, origin);
  check_restart_workers(s, origin);
  check_backup_workers(s, origin);
  check_batch_assignment(s, origin);
  check_server_tables(cfg, s, origin);
  check_host_aggregation(s, origin);
  if (cfg.get_int("cluster.heartbeat_interval_ms") >= cfg.get_int("cluster.heartbeat_timeout_ms")) {
    fail(origin, "cluster.heartbeat_interval_ms",
         std::to_string(cfg.get_int("cluster.heartbeat_interval_ms")) +
             " is not shorter than cluster.heartbeat_timeout_ms = " +
             std::to_string(cfg.get_int("cluster.heartbeat_timeout_ms")) +
             ": every node would be declared dead between two heartbeats");
  }
  int64_t values = 1;  // each dimension is at most 65536 (its range): no product below overflows
  std::string shape;
  for (int64_t d : cfg.get_int_list("data.image_shape")) {
    shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    values = std::min(values * d, kMaxSampleValues + 1);
  }
  if (values > kMaxSampleValues) {
    fail(origin, "data.image_shape",
         "[" + shape + "] holds more than " + std::to_string(kMaxSampleValues) +
             " values per sample (64 MiB of float32): lower the shape");
  }
  (void)TraceWindow::parse(cfg.get_string("trace.steps"), "config " + origin + ": key 'trace.steps'");
  if (s.loss_scaling != "none" && s.restart_workers) {
    fail(origin, "train.loss_scaling",
         "a worker restarted by cluster.restart_workers would start from a loss scale of its own, not the "
         "job's: set cluster.restart_workers = false, or train.loss_scaling = none");
  }
}

JobShape JobShape::from_config(const Config& cfg) {
  JobShape s;
  s.mode = mode_from_name(cfg.get_string("cluster.mode"));
  s.min_workers = static_cast<uint32_t>(cfg.get_int("cluster.min_workers"));
  s.elastic_global_batch = cfg.get_string("cluster.elastic_batch") == "global";
  s.continue_without_dead_workers = cfg.get_string("cluster.failure_policy") == "continue";
  s.restart_workers = cfg.get_bool("cluster.restart_workers");
  s.restart_servers = cfg.get_string("cluster.server_failure_policy") == "restart";
  s.checkpoint_on_sigterm = cfg.get_string("checkpoint.on_sigterm") == "checkpoint";
  s.transport = cfg.get_string("cluster.transport");
  s.host_aggregation = cfg.get_string("cluster.host_aggregation");
  s.compression = cfg.get_string("cluster.compression");
  s.device = cfg.get_string("train.device");
  s.precision = cfg.get_string("train.precision");
  s.loss_scaling = cfg.get_string("train.loss_scaling");
  s.worker_batches = cfg.get_int_list("train.worker_batch_sizes");
  s.backup_workers = static_cast<uint32_t>(cfg.get_int("cluster.backup_workers"));
  s.dynamic_batches = cfg.get_string("cluster.batch_assignment") == "dynamic";
  return s;
}

const char* JobShape::mode_name() const {
  switch (mode) {
    case JobMode::kAsync: return "async";
    case JobMode::kSsp: return "ssp";
    case JobMode::kSync: break;
  }
  return "sync";
}

std::vector<std::string> JobShape::host_aggregation_needs() const {
  std::vector<std::string> needs;
  if (!sync()) needs.push_back("cluster.mode = sync");
  if (continue_without_dead_workers) needs.push_back("cluster.failure_policy = abort");
  if (elastic()) needs.push_back("cluster.min_workers = 0");
  if (restart_workers) needs.push_back("cluster.restart_workers = false");
  if (compression != "none") needs.push_back("cluster.compression = none");
  if (backup_workers > 0) needs.push_back("cluster.backup_workers = 0");
  // A step skipped for loss scaling is said by each worker's own pushes (protocol `skipped`), not by a host's sum.
  if (scales_loss()) needs.push_back("train.loss_scaling = none");
  return needs;
}

}  // namespace pshard
