// What a scheduler tells one task of a parallel launch (srun, mpirun/mpiexec, a PBS job), read from
// its environment into one scheduler-neutral shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/util/env.h"

namespace pshard::scheduler {

// Which variables a task reads. kAuto picks by what is set (task_env.cc says in which order).
enum class Scheduler { kAuto, kSlurm, kOpenMpi, kPmi, kPbs };

// "auto", "slurm", "openmpi", "pmi", "pbs"; and back (an Error lists the names).
const char* scheduler_name(Scheduler s);
Scheduler scheduler_from_name(const std::string& name);

// One task's view of the launch. The node list is known under SLURM and PBS; MPI launchers only tell
// a task its rank, the job size and its rank among the tasks on its node (nodes stays empty).
struct TaskEnv {
  Scheduler scheduler = Scheduler::kSlurm;
  int64_t job_id = 0;              // SLURM_JOB_ID / PBS_JOBID's number / digits of the MPI job id (the port)
  int64_t step_id = 0;             // SLURM_STEP_ID (0 elsewhere)
  std::string launch_id;           // names this launch's rendezvous file: unique per launch where the scheduler says so
  int64_t restart_count = 0;       // SLURM_RESTART_COUNT: > 0 in a requeued job (0 elsewhere)
  int64_t proc_id = 0;             // global task rank
  int64_t num_tasks = 0;           // tasks in the launch
  int64_t node_id = 0;             // index of this task's node in `nodes` (SLURM, PBS)
  int64_t local_id = 0;            // task index on this node
  int64_t local_size = 0;          // tasks on this node
  std::vector<std::string> nodes;  // the launch's nodes, in order (empty: not known)
  std::vector<int> tasks_per_node;   // tasks on each of `nodes`
  std::string node_name;             // this node's name (SLURMD_NODENAME, the PBS node file, else "")
  int64_t gpus_on_node = 0;          // SLURM_GPUS_ON_NODE (0: none or not set)
  std::string cuda_visible_devices;  // CUDA_VISIBLE_DEVICES as the scheduler set it ("" when unset)

  // Reads the variables of `which` (kAuto: the first scheduler whose variables are set) through
  // `getenv` (std::getenv in production, a map in tests). Throws pshard::Error naming the first
  // missing or malformed variable.
  //
  //   TaskEnv env = TaskEnv::read(process_getenv);                      // srun, mpirun or PBS
  //   TaskEnv env = TaskEnv::read(process_getenv, Scheduler::kSlurm);   // `pshard slurm`
  static TaskEnv read(const Getenv& getenv, Scheduler which = Scheduler::kAuto);
};

}  // namespace pshard::scheduler
