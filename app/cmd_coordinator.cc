// `pshard coordinator`: runs the coordinator of one job (rendezvous, barriers, heartbeats, failure policy;
// common/control/coordinator_process.h).
#include "app/command.h"
#include "common/control/coordinator_process.h"
#include "common/util/args.h"

namespace pshard::app {
namespace {

int run_coordinator(const std::vector<std::string>& args) {
  ArgParser p("pshard coordinator",
              "run the coordinator of a job: servers and workers register with it (--coordinator EP), get their "
              "ranks and the cluster map, and are watched by heartbeats. The job token is read from the environment "
              "variable PSHARD_JOB_TOKEN. Exits 0 when every worker left successfully, 1 when the job was aborted.");
  p.add_option("servers", "S", "number of servers in the job", true);
  p.add_option("workers", "W", "number of workers in the job", true);
  p.add_option("bind", "ENDPOINT", "ZeroMQ endpoint to bind (port 0 picks a free port)", false, "tcp://127.0.0.1:0");
  p.add_option("config", "FILE", "experiment config (TOML): cluster.* keys set heartbeats and the failure policy");
  p.add_multi("set", "KEY=VALUE", "override a config key");
  p.add_option("run-dir", "DIR", "write cluster.json (who runs where) into DIR");
  p.add_option(
      "key-dir", "DIR",
      "security.curve: directory of the job's key file curve.keys (default: security.key_dir, else RUN_DIR/keys)");
  if (!p.parse(args)) return 0;

  CoordinatorProcessOptions o;
  o.servers = p.get_int("servers");
  o.workers = p.get_int("workers");
  o.bind = p.get("bind");
  o.config_path = p.get("config");
  o.overrides = p.get_all("set");
  o.run_dir = p.get("run-dir");
  o.key_dir = p.get("key-dir");
  return run_coordinator_process(o);
}

}  // namespace

PSHARD_COMMAND(coordinator, "run the coordinator of a job (rendezvous, barriers, heartbeats)", run_coordinator);

}  // namespace pshard::app
