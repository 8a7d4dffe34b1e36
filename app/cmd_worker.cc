// `pshard worker`: one training worker of a job, through the parameter servers (worker/worker_process.h).
#include "app/command.h"
#include "common/error.h"
#include "common/util/args.h"
#include "worker/worker_process.h"

namespace pshard::app {
namespace {

int run_worker(const std::vector<std::string>& args) {
  ArgParser p("pshard worker",
              "one worker of a job: registers with the coordinator, trains its shard of the data and pushes "
              "gradients / pulls weights through the servers. Usually started by `pshard launch` or srun; the job "
              "token comes from the environment variable PSHARD_JOB_TOKEN.");
  p.add_option("coordinator", "ENDPOINT", "the coordinator, e.g. tcp://10.0.0.1:47000", true);
  p.add_option("config", "FILE", "experiment config (TOML)", true);
  p.add_multi("set", "KEY=VALUE", "override a config key");
  p.add_option("run-dir", "DIR", "the job's run directory (metrics are written by the coordinator)");
  p.add_option(
      "key-dir", "DIR",
      "security.curve: directory of the job's key file curve.keys (default: security.key_dir, else RUN_DIR/keys)");
  p.add_option("rank", "R", "ask for this worker rank (default: PSHARD_RANK, else assigned by the coordinator)");
  p.add_option("start-step", "K",
               "resume at global step K: no inits, pull the weights of step K from servers that restored their "
               "checkpoint of step K (pshard launch --resume passes it)",
               false, "0");
  p.add_flag("join",
             "rejoin a running sync job (a restarted worker, cluster.failure_policy = continue): take over a dead "
             "worker's rank, start a few steps after the servers' current step and be counted from then on");
  if (!p.parse(args)) return 0;

  WorkerProcessOptions o;
  o.coordinator = p.get("coordinator");
  o.config_path = p.get("config");
  o.overrides = p.get_all("set");
  o.run_dir = p.get("run-dir");
  o.key_dir = p.get("key-dir");
  if (p.has("rank")) {
    o.rank = p.get_int("rank");
    if (o.rank < 0) throw Error("pshard worker: --rank must be >= 0, got " + p.get("rank"));
  }
  o.start_step = p.get_int("start-step");
  o.join = p.flag("join");
  return run_worker_process(o);
}

}  // namespace

PSHARD_COMMAND(worker, "run one training worker of a job (started by launch or srun)", run_worker);

}  // namespace pshard::app
