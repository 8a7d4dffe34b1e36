// `pshard launch`: a whole job on this machine (coordinator, S servers, W workers), supervised.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pshard {

struct LocalLaunchOptions {
  int64_t servers = 1;                      // 1..1024
  int64_t workers = 1;                      // 1..1024
  int64_t max_workers = 0;                  // --workers MIN:MAX: MAX (workers is MIN); 0: a fixed number of workers
  std::string config_path;                  // "" with resume_dir: RUN_DIR/config.toml
  std::vector<std::string> overrides;       // --set KEY=VALUE, passed to every process
  std::string run_dir;                      // "" = runs/<run.name>
  std::string resume_dir;                   // continue this run from its newest complete checkpoint ("" = fresh)
  bool start_over = false;                  // --run-dir holds a run: move it to RUN_DIR.old-N instead of refusing
  int port = 0;                             // the coordinator's port on 127.0.0.1; 0 = a free one
  std::string key_dir;                      // security.curve: --key-dir ("" = security.key_dir, else RUN_DIR/keys)
  std::string server_exe, worker_exe;       // run these instead of `pshard server` / `pshard worker`
  std::vector<std::string> worker_program;  // `-- CMD ARGS`: each worker runs this with PSHARD_* variables (JobPlan)
  std::chrono::milliseconds grace{5000};
  std::chrono::milliseconds timeout{0};  // 0: no limit
  // --hosts h1:4,h2:4: run the job on these hosts over ssh (launcher/remote/remote_job.h) instead of here; then
  // `workers` is 0 or the hosts' sum, `servers` 0 means one per host, and `port` is the coordinator's on the first
  // host.
  std::string hosts;
  std::string remote_pshard;  // the pshard executable on the hosts ("" = this executable's path)
  // Called once the run directory is settled, before any process starts (`pshard launch --dashboard` starts its
  // page there); an Error it throws refuses the launch.
  std::function<void(const std::string& run_dir)> on_run_dir;
};

// Starts the coordinator, the servers and the workers as child processes of this one (with `hosts`: one ssh child
// per host, which runs that host's processes under `pshard host`) (output lines
// prefixed with their role and rank, a live progress line on stderr), supervises them (any failure or
// Ctrl-C stops all; cluster.server_failure_policy = restart restarts the job from its newest
// checkpoint) and returns the job's exit status. Throws pshard::Error for bad options or configs,
// before any process starts.
//
//   LocalLaunchOptions o;
//   o.servers = 2; o.workers = 4; o.config_path = "configs/fmnist_mlp_sync.toml";
//   return run_local_launch(o);
int run_local_launch(const LocalLaunchOptions& options);

}  // namespace pshard
