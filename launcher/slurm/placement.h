// Which role and rank a task of `srun pshard slurm` takes, from the SLURM_* environment.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/control/cluster_map.h"

namespace pshard::slurm {

// What SLURM tells one task (the step's values win over the job's where SLURM sets both).
struct SlurmEnv {
  int64_t job_id = 0;                // SLURM_JOB_ID
  int64_t step_id = 0;               // SLURM_STEP_ID (0 when absent)
  int64_t proc_id = 0;               // SLURM_PROCID: global task rank
  int64_t num_tasks = 0;             // SLURM_STEP_NUM_TASKS, else SLURM_NTASKS
  int64_t node_id = 0;               // SLURM_NODEID: index of this task's node in `nodes`
  int64_t local_id = 0;              // SLURM_LOCALID: task index on this node
  std::vector<std::string> nodes;    // SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST, expanded
  std::vector<int> tasks_per_node;   // SLURM_STEP_TASKS_PER_NODE, else SLURM_TASKS_PER_NODE, expanded
  std::string node_name;             // SLURMD_NODENAME (else nodes[node_id])
  int64_t gpus_on_node = 0;          // SLURM_GPUS_ON_NODE (0: none or not set)
  std::string cuda_visible_devices;  // CUDA_VISIBLE_DEVICES as SLURM set it ("" when unset)

  // Reads the variables through `getenv` (std::getenv in production, a map in
  // tests). Throws pshard::Error naming the first missing or malformed one.
  //
  //   SlurmEnv env = SlurmEnv::read([](const char* k) { return std::getenv(k); });
  static SlurmEnv read(const std::function<const char*(const char*)>& getenv);
};

// How to place roles on the step's nodes.
struct Placement {
  int servers_per_node = 1;  // without server nodes: the first N tasks of every node are servers
  int server_nodes = 0;      // > 0: every task on the first K nodes is a server, every other task a worker
};

// One task's part in the job.
struct TaskPlan {
  NodeRole role = NodeRole::kWorker;  // kServer or kWorker (the coordinator runs beside one of them)
  uint32_t rank = 0;                  // rank within the role, ordered by (node, local id)
  uint32_t num_servers = 0;
  uint32_t num_workers = 0;
  bool runs_coordinator = false;  // node 0, local id 0
  uint32_t local_role_index = 0;  // index among the tasks of the same role on this node (GPU choice)
  std::string node;               // this task's node name
  std::string first_node;         // where the coordinator runs
  std::vector<uint32_t> servers_on_node, workers_on_node;  // per node
};

// The placement rule (docs/SLURM.md). Pure: every task computes the same
// plan for the whole step and picks its own entry. Throws pshard::Error when
// the step cannot hold at least one server and one worker, or when the SLURM
// values disagree (e.g. NTASKS != sum of tasks per node).
//
//   TaskPlan t = plan_task(SlurmEnv::read(getenv), Placement{1, 0});
//   // node[1-2] with 2 tasks each: node1 = server 0 (+ coordinator), worker 0; node2 = server 1, worker 1
TaskPlan plan_task(const SlurmEnv& env, const Placement& placement);

// The coordinator's port when --port is not given: 10000 + (job_id % 2500) * 8 + step_id % 8,
// in 10000..29999 (below Linux's ephemeral range), distinct for 8 concurrent steps of one job.
int coordinator_port(int64_t job_id, int64_t step_id);

// The CUDA_VISIBLE_DEVICES value for a worker: the `local_role_index`-th device
// (mod count) of SLURM's own CUDA_VISIBLE_DEVICES list when set, else of
// 0..gpus_on_node-1. Empty when the node has no GPUs.
std::string worker_gpu(const SlurmEnv& env, uint32_t local_role_index);

}  // namespace pshard::slurm
