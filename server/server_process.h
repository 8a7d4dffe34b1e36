// One parameter server process of a job (`pshard server`): registers with the coordinator, serves its
// slices (server/kv/kv_server.h) until the job ends, and follows the job's failure policy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pshard {

struct ServerProcessOptions {
  std::string coordinator;             // "" = standalone (no heartbeats): needs servers, workers and rank
  std::string bind = "tcp://*:0";      // where workers reach this server (port 0: a free port)
  std::string config_path;             // the experiment config
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string run_dir;                 // checkpoints go to RUN_DIR/checkpoints; "" = none
  std::string key_dir;                 // security.curve: "" = security.key_dir, else RUN_DIR/keys
  int64_t restore_step = -1;           // >= 0: start from this server's checkpoint of that step (needs run_dir)
  int64_t rank = -1;                   // -1: PSHARD_RANK, else assigned by the coordinator
  int64_t servers = 0, workers = 0;    // standalone only: the job's shape
};

// Runs the server until the job ends; returns the process exit status (0: a clean shutdown). Throws
// pshard::Error for bad options, configs or environment (PSHARD_RANK, PSHARD_JOB_TOKEN) before serving.
//
//   ServerProcessOptions o;
//   o.coordinator = "tcp://10.0.0.1:47000";
//   o.config_path = "configs/fmnist_mlp_sync.toml";
//   return run_server_process(o);
int run_server_process(const ServerProcessOptions& options);

}  // namespace pshard
