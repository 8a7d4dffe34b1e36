// `pshard server`: one parameter server of a job (slices, optimizer, BSP/ASP/SSP) behind a ZeroMQ ROUTER
// (server/server_process.h).
#include "app/command.h"
#include "common/error.h"
#include "common/util/args.h"
#include "server/server_process.h"

namespace pshard::app {
namespace {

int run_server(const std::vector<std::string>& args) {
  ArgParser p("pshard server",
              "one parameter server of a job: registers with the coordinator, holds its share of the model's slices "
              "and applies the optimizer to the workers' gradients. Usually started by `pshard launch` or srun; the "
              "job token comes from PSHARD_JOB_TOKEN. The model's tensor list arrives with worker 0's init "
              "messages. Without --coordinator it runs standalone (no heartbeats) with --servers/--workers/--rank "
              "and prints its endpoint on stdout.");
  p.add_option("coordinator", "ENDPOINT", "the coordinator, e.g. tcp://10.0.0.1:47000");
  p.add_option("bind", "ENDPOINT", "where workers reach this server (port 0: any free port)", false, "tcp://*:0");
  p.add_option("config", "FILE", "experiment config (TOML)", true);
  p.add_multi("set", "KEY=VALUE", "override a config key");
  p.add_option("run-dir", "DIR",
               "the job's run directory: checkpoints go to DIR/checkpoints (checkpoint.every_steps), and the "
               "default key directory is DIR/keys");
  p.add_option(
      "key-dir", "DIR",
      "security.curve: directory of the job's key file curve.keys (default: security.key_dir, else RUN_DIR/keys)");
  p.add_option("restore-step", "K",
               "start from DIR/checkpoints/server-R.step-K.ckpt (weights, optimizer state, versions) instead of "
               "worker 0's init; needs --run-dir (pshard launch --resume passes it)");
  p.add_option("rank", "R", "ask for this server rank (default: PSHARD_RANK, else assigned by the coordinator)");
  p.add_option("servers", "S", "standalone: number of servers");
  p.add_option("workers", "W", "standalone: number of workers");
  if (!p.parse(args)) return 0;

  ServerProcessOptions o;
  o.coordinator = p.get("coordinator");
  o.bind = p.get("bind");
  o.config_path = p.get("config");
  o.overrides = p.get_all("set");
  o.run_dir = p.get("run-dir");
  o.key_dir = p.get("key-dir");
  if (p.has("restore-step")) o.restore_step = p.get_int("restore-step");
  if (p.has("rank")) {
    o.rank = p.get_int("rank");
    if (o.rank < 0) throw Error("pshard server: --rank must be >= 0, got " + p.get("rank"));
  }
  if (p.has("servers")) o.servers = p.get_int("servers");
  if (p.has("workers")) o.workers = p.get_int("workers");
  return run_server_process(o);
}

}  // namespace

PSHARD_COMMAND(server, "one parameter server of a job (usually started by pshard launch)", run_server);

}  // namespace pshard::app
