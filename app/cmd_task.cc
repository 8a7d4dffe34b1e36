// `pshard task` (alias `pshard slurm`): one task of a parallel launch (srun, mpirun/mpiexec, PBS); the
// role comes from the scheduler's variables (launcher/scheduler/scheduled_task.h).
#include "app/command.h"
#include "common/error.h"
#include "common/util/args.h"
#include "launcher/scheduler/scheduled_task.h"

namespace pshard::app {
namespace {

int run_task_as(const std::vector<std::string>& args, const std::string& program,
                const std::string& default_scheduler) {
  ArgParser p(program,
              "run as every task of a parallel launch (`srun pshard task --config F`, `mpirun -np N pshard task "
              "--config F`, or pbsdsh in a PBS job): each task derives its role and rank from the scheduler's "
              "variables (SLURM_*, OMPI_COMM_WORLD_*, PMI_*/PMIX_*, PBS_NODEFILE + PBS_VNODENUM). By default the "
              "first --servers-per-node tasks of each node are servers and the rest workers; with --server-nodes K "
              "the first K nodes hold only servers. Task 0 also runs the coordinator. The job token is "
              "PSHARD_JOB_TOKEN, else a random one task 0 writes to a 0600 file in the run directory (which must "
              "be shared). See docs/SLURM.md.");
  p.add_option("config", "FILE", "experiment config (TOML), on a filesystem every node sees", true);
  p.add_multi("set", "KEY=VALUE", "override a config key");
  p.add_option("run-dir", "DIR", "run directory, shared by all nodes (default runs/<run.name> under the cwd)");
  p.add_option("scheduler", "NAME", "whose variables to read: auto, slurm, openmpi, pmi (MPICH/Hydra, PMIx) or pbs",
               false, default_scheduler);
  p.add_option("servers-per-node", "N", "servers among each node's tasks (without --server-nodes)", false, "1");
  p.add_option("server-nodes", "K", "dedicated server nodes: every task on the first K nodes is a server", false, "0");
  p.add_option("port", "P", "coordinator port (default 10000 + (job id % 2500) * 8 + step id % 8)");
  p.add_option("iface", "IFACE", "advertise this interface's IPv4 address (default: the address of the node name)");
  p.add_option("key-dir", "DIR",
               "security.curve: the job's key directory, shared by all nodes (default: security.key_dir, else "
               "RUN_DIR/keys); task 0 creates curve.keys there if missing");
  p.add_option("coordinator-host", "HOST",
               "reach the coordinator at HOST (default: the first node's name; under mpirun: task 0's address, "
               "told through the run directory)");
  p.add_option("grace-ms", "MS", "how long this task's processes get to exit after SIGTERM before SIGKILL", false,
               "5000");
  p.add_option("max-workers", "MAX",
               "an elastic job: the worker tasks are its fewest workers, and `pshard join RUN_DIR` adds more, up to "
               "MAX, from any node that sees the run directory");
  p.add_flag("dry-run", "print this task's role, rank and addresses as one JSON line and exit");
  p.allow_command(
      "every worker task runs this program instead of `pshard worker` (e.g. python3 train.py with pshard.torch), "
      "with PSHARD_* variables (docs/PYTHON.md)");
  if (!p.parse(args)) return 0;

  scheduler::ScheduledTaskOptions o;
  o.config_path = p.get("config");
  o.overrides = p.get_all("set");
  o.run_dir = p.get("run-dir");
  o.scheduler = scheduler::scheduler_from_name(p.get("scheduler"));
  o.placement.servers_per_node = static_cast<int>(p.get_int("servers-per-node"));
  o.placement.server_nodes = static_cast<int>(p.get_int("server-nodes"));
  if (p.has("port")) {
    const int64_t v = p.get_int("port");
    if (v < 1 || v > 65535) throw Error(program + ": --port must be in 1..65535, got " + p.get("port"));
    o.port = static_cast<int>(v);
  }
  o.iface = p.get("iface");
  o.key_dir = p.get("key-dir");
  o.coordinator_host = p.get("coordinator-host");
  o.grace = std::chrono::milliseconds(p.get_int("grace-ms"));
  if (p.has("max-workers")) {
    o.max_workers = p.get_int("max-workers");
    if (o.max_workers < 1) throw Error(program + ": --max-workers must be at least 1, got " + p.get("max-workers"));
  }
  o.dry_run = p.flag("dry-run");
  o.worker_program = p.command();
  return scheduler::run_scheduled_task(o, process_getenv);
}

int run_task(const std::vector<std::string>& args) { return run_task_as(args, "pshard task", "auto"); }
int run_slurm(const std::vector<std::string>& args) { return run_task_as(args, "pshard slurm", "slurm"); }

}  // namespace

PSHARD_COMMAND(task, "run one task of srun / mpirun / a PBS job: role and rank from the scheduler (docs/SLURM.md)",
               run_task);
PSHARD_COMMAND(slurm, "the same as `pshard task --scheduler slurm` (one task of an srun step)", run_slurm);

}  // namespace pshard::app
