// The coordinator process of a job (`pshard coordinator`): runs the Coordinator (coordinator.h) until the
// job ends or the process is told to stop (SIGINT, SIGTERM), and exits with the job's status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pshard {

struct CoordinatorProcessOptions {
  int64_t servers = 0, workers = 0;        // the job's shape, each in 1..65536
  std::string bind = "tcp://127.0.0.1:0";  // ZeroMQ endpoint to bind (port 0: a free port)
  std::string config_path;                 // "" = the defaults with `overrides` applied
  std::vector<std::string> overrides;      // --set KEY=VALUE
  std::string run_dir;                     // cluster.json, metrics and the summary go there; "" = none
  std::string key_dir;                     // security.curve: "" = security.key_dir, else RUN_DIR/keys
};

// Runs the coordinator until the job ends; returns its exit status (Coordinator::Result::exit_code: 0 when every
// worker left successfully). The job token is PSHARD_JOB_TOKEN (common/run/node_env.h). Throws pshard::Error for bad
// options, configs or keys before listening.
//
//   CoordinatorProcessOptions o;
//   o.servers = 2; o.workers = 4;
//   o.bind = "tcp://0.0.0.0:47000";
//   o.config_path = "configs/fmnist_mlp_sync.toml";
//   return run_coordinator_process(o);
int run_coordinator_process(const CoordinatorProcessOptions& options);

}  // namespace pshard
