// `pshard coordinator`: runs the coordinator of one job (rendezvous, barriers, heartbeats, failure policy).
#include <csignal>
#include <cstdlib>
#include <thread>

#include "app/command.h"
#include "common/config/config.h"
#include "common/control/coordinator.h"
#include "common/error.h"
#include "common/metrics/metrics_writer.h"
#include "common/transport/curve.h"
#include "common/util/args.h"
#include "common/util/log.h"

namespace pshard::app {
namespace {

volatile std::sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

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

  Config cfg = p.has("config") ? Config::from_file(p.get("config"), p.get_all("set")) : Config::defaults();
  if (!p.has("config")) {
    for (const std::string& o : p.get_all("set")) cfg.set(o);
  }
  log::configure("coordinator", log::level_from_string(cfg.get_string("log.level")));
  int64_t servers = p.get_int("servers"), workers = p.get_int("workers");
  if (servers < 1 || servers > 65536) throw Error("pshard coordinator: --servers must be in 1..65536");
  if (workers < 1 || workers > 65536) throw Error("pshard coordinator: --workers must be in 1..65536");

  Coordinator::Options opt =
      Coordinator::Options::from_config(cfg, static_cast<uint32_t>(servers), static_cast<uint32_t>(workers));
  opt.bind = p.get("bind");
  const char* token = std::getenv("PSHARD_JOB_TOKEN");
  opt.job_token = token ? token : "";
  if (opt.job_token.empty()) {
    PSHARD_LOG(kWarn) << "PSHARD_JOB_TOKEN is not set: only nodes without a token can join";
  }
  opt.curve = transport::job_curve_keys(cfg, transport::curve_key_dir(cfg, p.get("key-dir"), p.get("run-dir")));
  if (p.has("run-dir")) {
    opt.run_dir = p.get("run-dir");
    make_directories(opt.run_dir);  // an Error naming the path, e.g. when it is a file
  }

  Coordinator coord(opt);
  PSHARD_LOG(kInfo) << "listening on " << coord.endpoint();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  coord.start();
  for (;;) {
    if (auto r = coord.wait_for(std::chrono::milliseconds(50))) return r->exit_code;
    if (g_signal != 0) {
      coord.request_stop(std::string("received signal ") + (g_signal == SIGINT ? "SIGINT" : "SIGTERM"));
    }
  }
}

}  // namespace

PSHARD_COMMAND(coordinator, "run the coordinator of a job (rendezvous, barriers, heartbeats)", run_coordinator);

}  // namespace pshard::app
