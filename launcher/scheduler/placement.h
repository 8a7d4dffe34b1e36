// Which role and rank a task of a parallel launch (`srun|mpirun pshard task`, PBS) takes, from its TaskEnv.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/control/cluster_map.h"
#include "launcher/scheduler/task_env.h"

namespace pshard::scheduler {

// How to place roles on the step's nodes.
struct Placement {
  int servers_per_node = 1;  // without server nodes: the first N tasks of every node are servers
  int server_nodes = 0;      // > 0: every task on the first K nodes is a server, every other task a worker
};

// One task's part in the job.
struct TaskPlan {
  NodeRole role = NodeRole::kWorker;  // kServer or kWorker (the coordinator runs beside one of them)
  int64_t rank = 0;  // rank within the role, ordered by (node, local id); -1: the coordinator assigns it
                     // (MPI launchers, which do not tell a task the node list)
  uint32_t num_servers = 0;
  uint32_t num_workers = 0;
  bool runs_coordinator = false;  // node 0, local id 0
  uint32_t local_role_index = 0;  // index among the tasks of the same role on this node (GPU choice)
  std::string node;               // this task's node name
  std::string first_node;         // where the coordinator runs ("" when not known: the rendezvous file says)
  std::vector<uint32_t> servers_on_node, workers_on_node;  // per node
};

// The placement rule (docs/SLURM.md). Pure: every task computes the same
// plan for the whole step and picks its own entry. Throws pshard::Error when
// the step cannot hold at least one server and one worker, or when the
// scheduler's values disagree (e.g. NTASKS != sum of tasks per node). Without
// a node list (MPI launchers) the first servers_per_node tasks of every node
// are servers, every node must run the same number of tasks, and the
// coordinator assigns ranks; --server-nodes needs a node list.
//
//   TaskPlan t = plan_task(TaskEnv::read(process_getenv), Placement{1, 0});
//   // node[1-2] with 2 tasks each: node1 = server 0 (+ coordinator), worker 0; node2 = server 1, worker 1
TaskPlan plan_task(const TaskEnv& env, const Placement& placement);

// The coordinator's port when --port is not given: 10000 + (job_id % 2500) * 8 + step_id % 8,
// in 10000..29999 (below Linux's ephemeral range), distinct for 8 concurrent steps of one job.
int coordinator_port(int64_t job_id, int64_t step_id);

// The CUDA_VISIBLE_DEVICES value for a worker: the `local_role_index`-th device
// (mod count) of SLURM's own CUDA_VISIBLE_DEVICES list when set, else of
// 0..gpus_on_node-1. Empty when the node has no GPUs.
std::string worker_gpu(const TaskEnv& env, uint32_t local_role_index);

}  // namespace pshard::scheduler
