// A job's shape: what kind of job a config describes (its consistency mode, whether it is elastic, what it does
// when a worker or a server dies, how its payloads move and are summed, what its workers compute in), read once
// from the config as one typed value, with every rule about keys that are only wrong together.
//
// Every entry point (config --check, launch, task, --hosts, the coordinator, the servers, pshard's worker and the
// C API) takes its decisions about the job from a JobShape instead of reading these keys itself, so that "is this
// job elastic" or "may this job lose a worker" has one answer. How many servers and workers it runs is the job
// plan's (launcher/job_plan.h): the command line decides it, not the config.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pshard {

class Config;

enum class JobMode { kSync, kAsync, kSsp };

struct JobShape {
  JobMode mode = JobMode::kSync;
  // cluster.min_workers: > 0 makes the job elastic (pshard launch --workers MIN:MAX), its members changing between
  // epochs.
  uint32_t min_workers = 0;
  // cluster.elastic_batch = global: an elastic job's global batch is min_workers' (each worker's batch shrinks as
  // more train), not each epoch's members'.
  bool elastic_global_batch = false;
  // cluster.failure_policy = continue: the others go on without a dead worker.
  bool continue_without_dead_workers = false;
  // cluster.restart_workers: pshard launch starts a dead worker again; it rejoins the running job.
  bool restart_workers = false;
  // cluster.server_failure_policy = restart: pshard launch restarts the job from its newest complete checkpoint.
  bool restart_servers = false;
  // checkpoint.on_sigterm = checkpoint: a stopped job checkpoints before it ends, to be resumed.
  bool checkpoint_on_sigterm = false;
  std::string transport = "auto";         // cluster.transport: auto, tcp, shm
  std::string host_aggregation = "auto";  // cluster.host_aggregation: auto, off, always
  std::string compression = "none";       // cluster.compression: how gradients are pushed
  std::string device = "cpu";             // train.device: cpu, cuda
  std::string precision = "fp32";         // train.precision: fp32, bf16, fp16
  std::string loss_scaling = "none";      // train.loss_scaling, auto resolved: none, dynamic, static
  // train.worker_batch_sizes: worker r's batch at [r] (uneven workers); empty: train.batch_size for every worker.
  std::vector<int64_t> worker_batches;
  // cluster.backup_workers: a sync step closes without this many of its last pushes (stragglers).
  uint32_t backup_workers = 0;
  // cluster.batch_assignment = dynamic: an async job's workers claim each epoch's batches as they go.
  bool dynamic_batches = false;

  static JobShape from_config(const Config& cfg);

  bool sync() const { return mode == JobMode::kSync; }
  bool elastic() const { return min_workers > 0; }
  // The job goes on when a worker dies: under failure_policy = continue, and in an elastic job, whose workers may
  // leave between epochs.
  bool may_lose_workers() const { return continue_without_dead_workers || elastic(); }
  bool cuda() const { return device == "cuda"; }
  bool uneven_batches() const { return !worker_batches.empty(); }
  // A sync step may close without its last pushes (cluster.backup_workers > 0; check_job_rules refuses it elsewhere).
  bool has_backup_workers() const { return sync() && backup_workers > 0; }
  // "sync", "async" or "ssp", as cluster.mode names it.
  const char* mode_name() const;
  // What one push per host (cluster.host_aggregation) needs of this job that it does not have, as the settings it
  // needs ("cluster.mode = sync", ...); empty when it may run. A host's sum counts for all its workers in one sync
  // step, each worker's own state aside. With `always` any need is refused when the config is read; `auto` then
  // leaves the workers pushing their own.
  std::vector<std::string> host_aggregation_needs() const;
  // train.loss_scaling is on (auto: for fp16, as Config resolves it when it is read).
  bool scales_loss() const { return loss_scaling == "auto" ? precision == "fp16" : loss_scaling != "none"; }
  // One push per host: host_aggregation is not off and the job has everything it needs.
  bool aggregates_per_host() const { return host_aggregation != "off" && host_aggregation_needs().empty(); }
};

// Every rule about keys whose values are only wrong together, checked once every file and --set is in (Config runs
// it whenever a config is read), so that every entry point refuses them alike. Throws an Error naming the key and
// `origin`.
void check_job_rules(const Config& cfg, const std::string& origin);

}  // namespace pshard
