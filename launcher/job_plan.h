// The processes of one job, described once: roles, ranks, addresses and the argv/environment
// contract of every process (docs/OPERATIONS.md), for `pshard launch`, the scheduler task command
// (`pshard task` under srun, mpirun or PBS) and `pshard bench kv`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "launcher/local_job.h"

namespace pshard {

// What every process of a job shares, and how each one is started. A launcher fills it in once
// and asks it for the processes it runs; nothing else builds a pshard command line. The processes
// read the environment it exports through NodeEnv (common/run/node_env.h).
//
//   JobPlan plan;
//   plan.config_path = "/abs/configs/fmnist_mlp.toml";
//   plan.run_dir = "/abs/runs/mlp";
//   plan.job_token = new_job_token();
//   plan.num_servers = 2; plan.num_workers = 4;
//   plan.coordinator = "tcp://127.0.0.1:47000";
//   job.add(plan.coordinator_process("tcp://127.0.0.1:47000"));
//   job.add(plan.server_process(0, "tcp://127.0.0.1:47001"));
//   job.add(plan.worker_process(0));
struct JobPlan {
  std::string executable;              // the pshard executable (default: this one, self_executable())
  std::string config_path;             // absolute path of the experiment config every process reads
  std::vector<std::string> overrides;  // --set KEY=VALUE, passed to every process
  std::string run_dir;                 // absolute; "" for none (benchmarks)
  std::string key_dir;                 // security.curve: the job's key directory; "" = plaintext
  std::string job_token;               // PSHARD_JOB_TOKEN of every process
  std::string run_id;                  // PSHARD_RUN_ID of servers and workers (RUN_DIR/run-id); "" = not set
  uint32_t num_servers = 1;
  uint32_t num_workers = 1;
  std::string coordinator;                  // endpoint the servers and workers connect to; "" = standalone servers
  int64_t resume_step = -1;                 // >= 0: servers restore this checkpoint step, workers continue there
  std::vector<std::string> server_command;  // default {executable, "server"} (pshard launch --server-exe)
  std::vector<std::string> worker_command;  // default {executable, "worker"} (--worker-exe, bench drivers)
  // `pshard launch ... -- CMD ARGS`: every worker runs this program as given (no pshard arguments added); it finds
  // the job in user_env() (worker/capi/pshard_c.h, python/pshard). Empty: workers are pshard workers.
  std::vector<std::string> user_command;
  // > 0: the workers this launcher starts on one host, exported to each as PSHARD_WORKERS_ON_HOST so that
  // train.threads = 0 shares the host's cores among them (worker/trainer/run_setup.h) instead of every worker
  // starting one OpenMP thread per core. 0: not known (scheduler tasks, whose CPU affinity says their share).
  int64_t workers_on_host = 0;
  // CUDA workers of one host: worker i (its local rank) gets CUDA_VISIBLE_DEVICES = worker_gpus[i % size], so they
  // spread over the host's GPUs as scheduler tasks do (launcher/gpu_assignment.h). Empty: CUDA_VISIBLE_DEVICES is
  // inherited unchanged.
  std::vector<std::string> worker_gpus;

  // The coordinator, bound at `bind`; it ends the job (the others get the grace period).
  ChildSpec coordinator_process(const std::string& bind) const;
  // Server `rank` (-1: the coordinator assigns it), reachable at `bind`.
  ChildSpec server_process(int64_t rank, const std::string& bind) const;
  // Worker `rank` (-1: the coordinator assigns it), with `extra` arguments at the end; `local_rank`: its index among
  // the workers on its host (PSHARD_LOCAL_RANK of a user_command; -1: the rank, all on one host). Every worker gets
  // PSHARD_WORKERS_ON_HOST when workers_on_host > 0, and CUDA_VISIBLE_DEVICES when worker_gpus is not empty; a
  // user_command worker also OMP_NUM_THREADS = the allowed CPUs / workers_on_host (at least 1) unless this process's
  // environment sets OMP_NUM_THREADS.
  ChildSpec worker_process(int64_t rank, const std::vector<std::string>& extra = {}, int64_t local_rank = -1) const;
  // `worker` (one of worker_process's) started again after it died (cluster.restart_workers): it rejoins the running
  // job, pshard's worker with --join, a user_command with PSHARD_REJOIN=1.
  ChildSpec rejoining_worker(const ChildSpec& worker) const;

  // The arguments every role gets: --config, --set..., --run-dir, --key-dir.
  std::vector<std::string> shared_args() const;
  // The environment every server and worker gets: PSHARD_JOB_TOKEN, PSHARD_RUN_ID (when set), PSHARD_RANK (when
  // rank >= 0).
  std::vector<std::string> node_env(int64_t rank) const;
  // What a user_command worker gets on top of node_env(rank): PSHARD_COORDINATOR, PSHARD_CONFIG, PSHARD_SET (the
  // --set overrides, one per line), PSHARD_RUN_DIR, PSHARD_KEY_DIR (when set), PSHARD_NUM_WORKERS and
  // PSHARD_LOCAL_RANK (its rank among the workers on its host).
  std::vector<std::string> user_env(int64_t rank, int64_t local_rank) const;
  // What every worker on a host gets on top: PSHARD_WORKERS_ON_HOST, CUDA_VISIBLE_DEVICES (see above).
  void host_env(int64_t local_rank, std::vector<std::string>* env) const;
};

// The run directory's copy of the resolved config (RUN_DIR/config.toml), written atomically, so that
// a run can be reproduced and resumed from its own directory.
void write_run_config(const std::string& run_dir, const Config& config);

}  // namespace pshard
