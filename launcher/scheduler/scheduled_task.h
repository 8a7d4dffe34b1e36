// One task of a parallel launch (`srun|mpirun|mpiexec pshard task`, or a PBS job's pbsdsh): finds its
// role from the scheduler's variables and runs it; task 0 also runs the coordinator.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launcher/scheduler/placement.h"
#include "launcher/scheduler/task_env.h"

namespace pshard::scheduler {

struct ScheduledTaskOptions {
  std::string config_path;             // the experiment config, on a file system every node sees
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string run_dir;                 // shared by all nodes; "" = runs/<run.name> under the cwd
  Scheduler scheduler = Scheduler::kAuto;
  Placement placement;
  int port = 0;                  // the coordinator's port; 0 = derived from the job id (coordinator_port)
  std::string iface;             // advertise this interface's IPv4 address ("" = the node name's)
  std::string key_dir;           // security.curve: --key-dir ("" = security.key_dir, else RUN_DIR/keys)
  std::string coordinator_host;  // "" = the first node (node list), else task 0's own address
  std::chrono::milliseconds grace{5000};
  std::vector<std::string> worker_program;  // `-- CMD ARGS`: a worker task runs this with PSHARD_* variables
  // > 0: an elastic job (cluster.min_workers = the worker tasks): up to this many workers, the others joining with
  // `pshard join RUN_DIR` from any node that sees the run directory (task 0 writes RUN_DIR/join.json).
  int64_t max_workers = 0;
  bool dry_run = false;  // print the task's plan as one JSON line instead of running it
};

// Runs this task's part of the job until it ends and returns the exit code (as `pshard launch`).
// Throws pshard::Error naming what is wrong in the environment or the options.
//
//   ScheduledTaskOptions o;
//   o.config_path = "/shared/configs/fmnist_mlp.toml";
//   return run_scheduled_task(o, process_getenv);
int run_scheduled_task(const ScheduledTaskOptions& options, const Getenv& getenv);

}  // namespace pshard::scheduler
