// Command lines and environments of a job's processes (see job_plan.h and docs/OPERATIONS.md).
#include "launcher/job_plan.h"

#include <algorithm>
#include <cstdlib>

#include "common/util/binary_file.h"
#include "common/util/child_process.h"
#include "common/util/host.h"
#include "launcher/gpu_assignment.h"

namespace pshard {
namespace {

std::string process_name(NodeRole role, int64_t rank) {
  return rank >= 0 ? std::string(role_name(role)) + " " + std::to_string(rank) : role_name(role);
}

}  // namespace

std::vector<std::string> JobPlan::shared_args() const {
  std::vector<std::string> args = {"--config", config_path};
  for (const std::string& s : overrides) {
    args.push_back("--set");
    args.push_back(s);
  }
  if (!run_dir.empty()) {
    args.push_back("--run-dir");
    args.push_back(run_dir);
  }
  if (!key_dir.empty()) {
    args.push_back("--key-dir");
    args.push_back(key_dir);
  }
  return args;
}

std::vector<std::string> JobPlan::node_env(int64_t rank) const {
  std::vector<std::string> env = {"PSHARD_JOB_TOKEN=" + job_token};
  if (!run_id.empty()) env.push_back("PSHARD_RUN_ID=" + run_id);
  if (rank >= 0) env.push_back("PSHARD_RANK=" + std::to_string(rank));
  return env;
}

std::vector<std::string> JobPlan::user_env(int64_t rank, int64_t local_rank) const {
  std::vector<std::string> env = node_env(rank);
  std::string set;
  for (const std::string& s : overrides) set += s + "\n";
  for (const std::string& e : {"PSHARD_COORDINATOR=" + coordinator, "PSHARD_CONFIG=" + config_path, "PSHARD_SET=" + set,
                               "PSHARD_RUN_DIR=" + run_dir, "PSHARD_NUM_WORKERS=" + std::to_string(num_workers),
                               "PSHARD_LOCAL_RANK=" + std::to_string(local_rank)}) {
    env.push_back(e);
  }
  if (!key_dir.empty()) env.push_back("PSHARD_KEY_DIR=" + key_dir);
  if (resume_step >= 0) env.push_back("PSHARD_START_STEP=" + std::to_string(resume_step));
  return env;
}

ChildSpec JobPlan::coordinator_process(const std::string& bind) const {
  ChildSpec c;
  c.name = "coordinator";
  c.role = NodeRole::kCoordinator;
  const std::string exe = executable.empty() ? self_executable() : executable;
  c.argv = {exe,      "coordinator", "--servers", std::to_string(num_servers), "--workers", std::to_string(num_workers),
            "--bind", bind};
  for (const std::string& a : shared_args()) c.argv.push_back(a);
  c.env = {"PSHARD_JOB_TOKEN=" + job_token};
  c.ends_job = true;  // once it ended, the others get the grace period to finish
  return c;
}

ChildSpec JobPlan::server_process(int64_t rank, const std::string& bind) const {
  ChildSpec c;
  c.name = process_name(NodeRole::kServer, rank);
  c.role = NodeRole::kServer;
  if (rank >= 0) c.rank = rank;
  const std::string exe = executable.empty() ? self_executable() : executable;
  c.argv = server_command.empty() ? std::vector<std::string>{exe, "server"} : server_command;
  if (coordinator.empty()) {  // standalone: no rendezvous, the layout comes from the command line
    for (const std::string& a : {std::string("--servers"), std::to_string(num_servers), std::string("--workers"),
                                 std::to_string(num_workers), std::string("--rank"), std::to_string(rank)}) {
      c.argv.push_back(a);
    }
  } else {
    c.argv.push_back("--coordinator");
    c.argv.push_back(coordinator);
  }
  for (const std::string& a : shared_args()) c.argv.push_back(a);
  c.argv.push_back("--bind");
  c.argv.push_back(bind);
  if (resume_step >= 0) {
    c.argv.push_back("--restore-step");
    c.argv.push_back(std::to_string(resume_step));
  }
  c.env = node_env(rank);
  return c;
}

ChildSpec JobPlan::worker_process(int64_t rank, const std::vector<std::string>& extra, int64_t local_rank) const {
  ChildSpec c;
  c.name = process_name(NodeRole::kWorker, rank);
  c.role = NodeRole::kWorker;
  if (rank >= 0) c.rank = rank;
  const int64_t host_index = local_rank >= 0 ? local_rank : std::max<int64_t>(rank, 0);
  if (!user_command.empty()) {
    c.argv = user_command;
    for (const std::string& a : extra) c.argv.push_back(a);
    c.env = user_env(rank, host_index);
    host_env(host_index, &c.env);
    if (workers_on_host > 0 && std::getenv("OMP_NUM_THREADS") == nullptr) {
      // The user's program (PyTorch, NumPy) sizes its OpenMP pool from OMP_NUM_THREADS, else one thread per core.
      c.env.push_back("OMP_NUM_THREADS=" + std::to_string(std::max<int64_t>(1, allowed_cpus() / workers_on_host)));
    }
    return c;
  }
  const std::string exe = executable.empty() ? self_executable() : executable;
  c.argv = worker_command.empty() ? std::vector<std::string>{exe, "worker"} : worker_command;
  if (!coordinator.empty()) {
    c.argv.push_back("--coordinator");
    c.argv.push_back(coordinator);
  }
  for (const std::string& a : shared_args()) c.argv.push_back(a);
  if (resume_step >= 0) {
    c.argv.push_back("--start-step");
    c.argv.push_back(std::to_string(resume_step));
  }
  for (const std::string& a : extra) c.argv.push_back(a);
  c.env = node_env(rank);
  host_env(host_index, &c.env);
  return c;
}

ChildSpec JobPlan::rejoining_worker(const ChildSpec& worker) const {
  ChildSpec again = worker;
  if (user_command.empty()) {
    again.argv.push_back("--join");
  } else {
    again.env.push_back("PSHARD_REJOIN=1");
  }
  return again;
}

void JobPlan::host_env(int64_t local_rank, std::vector<std::string>* env) const {
  if (workers_on_host > 0) env->push_back("PSHARD_WORKERS_ON_HOST=" + std::to_string(workers_on_host));
  const std::string gpu = gpu_for_local_rank(worker_gpus, local_rank);
  if (!gpu.empty()) env->push_back("CUDA_VISIBLE_DEVICES=" + gpu);
}

void write_run_config(const std::string& run_dir, const Config& config) {
  binary::write_file_atomically(run_dir + "/config.toml", config.to_toml(), "run config");
}

}  // namespace pshard
