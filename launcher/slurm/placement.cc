// Role and rank of a task under srun (see placement.h and docs/SLURM.md).
#include "launcher/slurm/placement.h"

#include <cerrno>
#include <cstdlib>
#include <numeric>

#include "common/error.h"
#include "common/util/env.h"
#include "launcher/slurm/hostlist.h"

namespace pshard::slurm {
namespace {

std::string first_set(const Getenv& getenv, std::initializer_list<const char*> names, const char** which) {
  for (const char* n : names) {
    const char* v = getenv(n);
    if (v != nullptr && *v != '\0') {
      *which = n;
      return v;
    }
  }
  *which = nullptr;
  return "";
}

int64_t required_int(const Getenv& getenv, std::initializer_list<const char*> names) {
  const char* which = nullptr;
  const std::string v = first_set(getenv, names, &which);
  if (which == nullptr) {
    throw Error(std::string("environment variable ") + *names.begin() +
                " is not set: run `pshard slurm` as a task of an srun step (srun pshard slurm ...)");
  }
  return parse_env_count(which, v);
}

}  // namespace

SlurmEnv SlurmEnv::read(const Getenv& getenv) {
  SlurmEnv e;
  e.job_id = required_int(getenv, {"SLURM_JOB_ID", "SLURM_JOBID"});
  const char* which = nullptr;
  const std::string step = first_set(getenv, {"SLURM_STEP_ID", "SLURM_STEPID"}, &which);
  e.step_id = which ? parse_env_count(which, step) : 0;
  e.proc_id = required_int(getenv, {"SLURM_PROCID"});
  e.num_tasks = required_int(getenv, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"});
  e.node_id = required_int(getenv, {"SLURM_NODEID"});
  e.local_id = required_int(getenv, {"SLURM_LOCALID"});

  const std::string nodelist =
      first_set(getenv, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}, &which);
  if (which == nullptr)
    throw Error("environment variable SLURM_JOB_NODELIST is not set: run `pshard slurm` under srun");
  try {
    e.nodes = expand_hostlist(nodelist);
  } catch (const Error& err) {
    throw Error(std::string(which) + ": " + err.what());
  }
  const std::string tpn = first_set(getenv, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}, &which);
  if (which != nullptr) {
    try {
      e.tasks_per_node = expand_tasks_per_node(tpn);
    } catch (const Error& err) {
      throw Error(std::string(which) + ": " + err.what());
    }
  } else if (e.num_tasks % static_cast<int64_t>(e.nodes.size()) == 0) {
    e.tasks_per_node.assign(e.nodes.size(), static_cast<int>(e.num_tasks / static_cast<int64_t>(e.nodes.size())));
  } else {
    throw Error("SLURM_TASKS_PER_NODE is not set and " + std::to_string(e.num_tasks) +
                " tasks do not divide evenly over " + std::to_string(e.nodes.size()) + " nodes");
  }
  const char* name = getenv("SLURMD_NODENAME");
  if (name != nullptr && *name != '\0') {
    e.node_name = name;
  } else if (e.node_id >= 0 && e.node_id < static_cast<int64_t>(e.nodes.size())) {
    e.node_name = e.nodes[static_cast<size_t>(e.node_id)];
  }
  const std::string gpus = first_set(getenv, {"SLURM_GPUS_ON_NODE"}, &which);
  e.gpus_on_node = which ? parse_env_count(which, gpus) : 0;
  const char* cvd = getenv("CUDA_VISIBLE_DEVICES");
  e.cuda_visible_devices = cvd ? cvd : "";
  return e;
}

TaskPlan plan_task(const SlurmEnv& env, const Placement& placement) {
  const size_t n = env.nodes.size();
  if (n == 0) throw Error("the SLURM node list is empty");
  if (env.tasks_per_node.size() != n) {
    throw Error("SLURM node list has " + std::to_string(n) + " nodes but tasks per node lists " +
                std::to_string(env.tasks_per_node.size()));
  }
  const int64_t total = std::accumulate(env.tasks_per_node.begin(), env.tasks_per_node.end(), int64_t{0});
  if (total != env.num_tasks) {
    throw Error("SLURM_NTASKS is " + std::to_string(env.num_tasks) + " but the tasks per node add up to " +
                std::to_string(total));
  }
  if (env.node_id < 0 || env.node_id >= static_cast<int64_t>(n)) {
    throw Error("SLURM_NODEID " + std::to_string(env.node_id) + " is outside the node list (" + std::to_string(n) +
                " nodes)");
  }
  const int on_node = env.tasks_per_node[static_cast<size_t>(env.node_id)];
  if (env.local_id < 0 || env.local_id >= on_node) {
    throw Error("SLURM_LOCALID " + std::to_string(env.local_id) + " is outside 0.." + std::to_string(on_node - 1) +
                " (tasks on node " + env.nodes[static_cast<size_t>(env.node_id)] + ")");
  }
  if (env.proc_id < 0 || env.proc_id >= env.num_tasks) {
    throw Error("SLURM_PROCID " + std::to_string(env.proc_id) + " is outside 0.." + std::to_string(env.num_tasks - 1));
  }
  if (placement.servers_per_node < 1) throw Error("--servers-per-node must be >= 1");
  if (placement.server_nodes < 0 || placement.server_nodes >= static_cast<int>(n)) {
    throw Error("--server-nodes " + std::to_string(placement.server_nodes) + " must leave at least one of the " +
                std::to_string(n) + " nodes for workers (0.." + std::to_string(n - 1) + ")");
  }

  TaskPlan plan;
  plan.servers_on_node.resize(n);
  plan.workers_on_node.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t tasks = static_cast<uint32_t>(env.tasks_per_node[i]);
    uint32_t s = 0;
    if (placement.server_nodes > 0) {
      s = i < static_cast<size_t>(placement.server_nodes) ? tasks : 0;
    } else {
      s = std::min(tasks, static_cast<uint32_t>(placement.servers_per_node));
    }
    plan.servers_on_node[i] = s;
    plan.workers_on_node[i] = tasks - s;
    plan.num_servers += s;
    plan.num_workers += tasks - s;
  }
  if (plan.num_workers == 0) {
    throw Error("no task is left for a worker: " + std::to_string(env.num_tasks) + " tasks on " + std::to_string(n) +
                " nodes, all servers (" +
                (placement.server_nodes > 0 ? "--server-nodes " + std::to_string(placement.server_nodes)
                                            : "--servers-per-node " + std::to_string(placement.servers_per_node)) +
                "); ask srun for more tasks per node");
  }

  const size_t me = static_cast<size_t>(env.node_id);
  const uint32_t local = static_cast<uint32_t>(env.local_id);
  uint32_t servers_before = 0, workers_before = 0;
  for (size_t i = 0; i < me; ++i) {
    servers_before += plan.servers_on_node[i];
    workers_before += plan.workers_on_node[i];
  }
  if (local < plan.servers_on_node[me]) {
    plan.role = NodeRole::kServer;
    plan.local_role_index = local;
    plan.rank = servers_before + local;
  } else {
    plan.role = NodeRole::kWorker;
    plan.local_role_index = local - plan.servers_on_node[me];
    plan.rank = workers_before + plan.local_role_index;
  }
  plan.runs_coordinator = env.node_id == 0 && env.local_id == 0;
  plan.node = env.node_name.empty() ? env.nodes[me] : env.node_name;
  plan.first_node = env.nodes[0];
  return plan;
}

int coordinator_port(int64_t job_id, int64_t step_id) {
  return 10000 + static_cast<int>((job_id % 2500) * 8 + step_id % 8);
}

std::string worker_gpu(const SlurmEnv& env, uint32_t local_role_index) {
  std::vector<std::string> devices;
  if (!env.cuda_visible_devices.empty()) {
    size_t start = 0;
    while (start <= env.cuda_visible_devices.size()) {
      size_t comma = env.cuda_visible_devices.find(',', start);
      if (comma == std::string::npos) comma = env.cuda_visible_devices.size();
      if (comma > start) devices.push_back(env.cuda_visible_devices.substr(start, comma - start));
      start = comma + 1;
    }
  } else {
    for (int64_t g = 0; g < env.gpus_on_node; ++g) devices.push_back(std::to_string(g));
  }
  if (devices.empty()) return "";
  return devices[local_role_index % devices.size()];
}

}  // namespace pshard::slurm
