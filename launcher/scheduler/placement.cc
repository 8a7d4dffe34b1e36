// Role and rank of a task of a parallel launch (see placement.h and docs/SLURM.md).
#include "launcher/scheduler/placement.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <numeric>

#include "common/error.h"
#include "common/util/env.h"
#include "launcher/gpu_assignment.h"
#include "launcher/scheduler/hostlist.h"

namespace pshard::scheduler {

namespace {

// MPI launchers tell a task only its rank, the size and its place on its node.
TaskPlan plan_without_node_list(const TaskEnv& env, const Placement& placement) {
  const std::string what = std::string(scheduler_name(env.scheduler)) + " launch";
  if (placement.server_nodes > 0) {
    throw Error("--server-nodes needs the node list, which a " + what +
                " does not give: use --servers-per-node (or srun / PBS)");
  }
  if (placement.servers_per_node < 1) throw Error("--servers-per-node must be >= 1");
  if (env.local_size < 1 || env.local_id < 0 || env.local_id >= env.local_size) {
    throw Error(what + ": this task's local rank " + std::to_string(env.local_id) + " is outside 0.." +
                std::to_string(env.local_size - 1));
  }
  if (env.proc_id < 0 || env.proc_id >= env.num_tasks) {
    throw Error(what + ": rank " + std::to_string(env.proc_id) + " is outside 0.." + std::to_string(env.num_tasks - 1));
  }
  if (env.num_tasks % env.local_size != 0) {
    throw Error(what + ": " + std::to_string(env.num_tasks) + " tasks with " + std::to_string(env.local_size) +
                " on this node do not fill whole nodes; give every node the same number of tasks (e.g. mpirun "
                "--map-by ppr:N:node)");
  }
  const int64_t nodes = env.num_tasks / env.local_size;
  const int64_t servers_here = std::min<int64_t>(env.local_size, placement.servers_per_node);
  TaskPlan plan;
  plan.num_servers = static_cast<uint32_t>(nodes * servers_here);
  plan.num_workers = static_cast<uint32_t>(env.num_tasks - nodes * servers_here);
  if (plan.num_workers == 0) {
    throw Error("no task is left for a worker: " + std::to_string(env.num_tasks) + " tasks, " +
                std::to_string(env.local_size) + " per node, all servers (--servers-per-node " +
                std::to_string(placement.servers_per_node) + "); start more tasks per node");
  }
  const bool server = env.local_id < servers_here;
  plan.role = server ? NodeRole::kServer : NodeRole::kWorker;
  plan.local_role_index = static_cast<uint32_t>(server ? env.local_id : env.local_id - servers_here);
  plan.rank = -1;
  plan.runs_coordinator = env.proc_id == 0;
  plan.node = env.node_name;
  return plan;
}

}  // namespace

TaskPlan plan_task(const TaskEnv& env, const Placement& placement) {
  const size_t n = env.nodes.size();
  if (n == 0) return plan_without_node_list(env, placement);
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

std::string worker_gpu(const TaskEnv& env, uint32_t local_role_index) {
  // TaskEnv keeps an unset CUDA_VISIBLE_DEVICES as "": then the node's GPU count decides.
  const char* visible = env.cuda_visible_devices.empty() ? nullptr : env.cuda_visible_devices.c_str();
  return gpu_for_local_rank(host_gpus(visible, env.gpus_on_node), local_role_index);
}

}  // namespace pshard::scheduler
