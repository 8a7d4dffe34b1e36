// One training worker process of a job (`pshard worker`): registers with the coordinator, trains its
// shard of the data through the parameter servers and reports its metrics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pshard {

struct WorkerProcessOptions {
  std::string coordinator;             // the coordinator's endpoint, e.g. tcp://10.0.0.1:47000
  std::string config_path;             // the experiment config
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string run_dir;                 // worker 0 saves RUN_DIR/model.bin; "" = not saved
  std::string key_dir;                 // security.curve: "" = security.key_dir, else RUN_DIR/keys
  int64_t rank = -1;                   // -1: PSHARD_RANK, else assigned by the coordinator
  int64_t start_step = 0;              // resume at this global step (pshard launch --resume)
  bool join = false;                   // rejoin a running sync job as a restarted worker
};

// Trains until the run ends; returns the process exit status. Throws pshard::Error for bad options,
// configs, data or environment before training.
//
//   WorkerProcessOptions o;
//   o.coordinator = "tcp://10.0.0.1:47000";
//   o.config_path = "configs/fmnist_mlp_sync.toml";
//   return run_worker_process(o);
int run_worker_process(const WorkerProcessOptions& options);

}  // namespace pshard
