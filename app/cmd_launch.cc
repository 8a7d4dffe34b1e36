// `pshard launch`: starts a whole job on this machine (coordinator, S servers, W workers) and supervises it
// (launcher/local_launch.h).
#include <cstdio>
#include <memory>

#include "app/command.h"
#include "common/error.h"
#include "common/util/args.h"
#include "common/util/host.h"
#include "launcher/local_launch.h"
#include "report/dashboard/dashboard_server.h"

namespace pshard::app {
namespace {

// A whole number >= 1 of `what`, e.g. MIN of --workers MIN:MAX.
int64_t parse_count(const std::string& text, const std::string& option, const std::string& what) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < 1 || v > 1024) {
    throw Error("pshard launch: " + option + ": " + what + " must be a number in 1..1024, got '" + text + "'");
  }
  return v;
}

int run_launch(const std::vector<std::string>& args) {
  ArgParser p("pshard launch",
              "start a whole job on this machine (or, with --hosts, on several hosts over ssh): the coordinator, S "
              "servers and W workers, each a child process "
              "whose output lines are prefixed with its role and rank. Ctrl-C, or any process failing, stops "
              "everything (SIGTERM, then SIGKILL after --grace-ms). Exits non-zero if any process failed. "
              "See docs/OPERATIONS.md for the command lines the children get.");
  p.add_option("servers", "S", "number of parameter servers (with --hosts: default one per host)");
  p.add_option("workers", "W",
               "number of workers (with --hosts: the sum of the hosts' counts); MIN:MAX: an elastic sync job that "
               "starts MIN workers, trains each epoch with the workers then in the job, drops a dead one, and takes "
               "up to MAX (`pshard join RUN_DIR` adds one; docs/OPERATIONS.md, \"Elastic jobs\")");
  p.add_option("hosts", "H1:N1,H2:N2",
               "run the job on these hosts over ssh (no scheduler): HOST or USER@HOST with its number of workers; "
               "the coordinator runs on the first host, server s on host s % hosts. Needs ssh keys that log in "
               "without a prompt; ssh options come from PSHARD_SSH (e.g. \"ssh -p 2222 -i KEY\"). The config, data and "
               "run directory must be at the same paths on every host (docs/OPERATIONS.md, \"Several hosts over "
               "ssh\")");
  p.add_option("remote-pshard", "PATH", "with --hosts: the pshard executable on the hosts (default: this one's path)");
  p.add_option("config", "FILE",
               "experiment config (TOML), passed to every process (default with --resume: "
               "RUN_DIR/config.toml)");
  p.add_multi("set", "KEY=VALUE", "override a config key, passed to every process");
  p.add_option("run-dir", "DIR",
               "run directory (default: the first of runs/<run.name>, runs/<run.name>.1, ... that holds no run); a "
               "DIR that holds a run is refused (see --resume, --start-over)");
  p.add_flag("start-over",
             "--run-dir holds a run: move it to DIR.old-N (nothing is deleted) and start a new run in DIR");
  p.add_option("port", "P",
               "coordinator port on 127.0.0.1 (default: a free port); with --hosts: on the first host (default: a "
               "random one in 20000..32767)");
  p.add_option("trace", "FIRST-LAST",
               "write a timeline of steps FIRST..LAST from every process (sets trace.steps; `pshard report "
               "RUN_DIR` merges it into trace.json)");
  p.add_option("key-dir", "DIR",
               "security.curve: where the job's key file curve.keys is created if missing (default: security.key_dir, "
               "else RUN_DIR/keys)");
  p.add_option("server-exe", "PATH", "run PATH instead of `pshard server` (gets the same arguments)");
  p.add_option("worker-exe", "PATH", "run PATH instead of `pshard worker` (a custom training loop on the KV API)");
  p.add_option("grace-ms", "MS", "how long processes get to exit after SIGTERM before SIGKILL", false, "5000");
  p.add_option("timeout", "SECONDS", "stop the job as failed after this long (0: no limit)", false, "0");
  p.add_option("resume", "RUN_DIR",
               "continue the run in RUN_DIR from the newest step every server has a complete checkpoint of "
               "(RUN_DIR/checkpoints); servers restore it, workers continue at that step");
  p.add_flag("dashboard",
             "serve a live web page of the job while it runs (progress, loss, accuracy, throughput, phases, bytes, "
             "stalls and failures); its URL, with a random token, is printed at the start. After the job, `pshard "
             "dashboard RUN_DIR` shows the run (docs/OPERATIONS.md, \"Dashboard\")");
  p.add_option(
      "dashboard-listen", "ADDR:PORT",
      "with --dashboard: where to serve it (default 127.0.0.1 on a free port; 0.0.0.0 lets other machines in)");
  p.allow_command(
      "run this program as every worker instead of `pshard worker` (e.g. python3 train.py with "
      "pshard.torch): it gets no pshard arguments, only PSHARD_* variables (docs/PYTHON.md)");
  if (!p.parse(args)) return 0;

  LocalLaunchOptions o;
  o.hosts = p.get("hosts");
  o.remote_pshard = p.get("remote-pshard");
  if (!o.remote_pshard.empty() && o.hosts.empty()) throw Error("pshard launch: --remote-pshard goes with --hosts");
  for (const char* n : {"servers", "workers"}) {
    if (!p.has(n) && o.hosts.empty()) {
      throw Error(std::string("pshard launch: --") + n + " is required");
    }
  }
  o.servers = p.has("servers") ? p.get_int("servers") : 0;
  o.workers = 0;
  if (p.has("workers")) {
    const std::string w = p.get("workers");
    const size_t colon = w.find(':');
    if (colon == std::string::npos) {
      o.workers = p.get_int("workers");
    } else {
      o.workers = parse_count(w.substr(0, colon), "--workers MIN:MAX", "MIN");
      o.max_workers = parse_count(w.substr(colon + 1), "--workers MIN:MAX", "MAX");
      if (o.max_workers < o.workers) {
        throw Error("pshard launch: --workers " + w + ": MAX is less than MIN (MIN:MAX, e.g. 2:4)");
      }
    }
  }
  o.config_path = p.get("config");
  o.overrides = p.get_all("set");
  if (p.has("trace")) o.overrides.push_back("trace.steps=" + p.get("trace"));
  o.run_dir = p.get("run-dir");
  o.resume_dir = p.get("resume");
  o.start_over = p.flag("start-over");
  if (p.has("port")) {
    const int64_t port = p.get_int("port");
    if (port < 1 || port > 65535) throw Error("pshard launch: --port must be in 1..65535, got " + p.get("port"));
    o.port = static_cast<int>(port);
  }
  o.key_dir = p.get("key-dir");
  o.server_exe = p.get("server-exe");
  o.worker_exe = p.get("worker-exe");
  o.worker_program = p.command();
  const int64_t grace_ms = p.get_int("grace-ms"), timeout_s = p.get_int("timeout");
  if (grace_ms < 0 || grace_ms > 3600 * 1000) {
    throw Error("--grace-ms must be in 0..3600000 (milliseconds), got " + p.get("grace-ms"));
  }
  if (timeout_s < 0 || timeout_s > 365LL * 24 * 3600) {
    throw Error("--timeout must be in 0..31536000 (seconds; 0: no limit), got " + p.get("timeout"));
  }
  o.grace = std::chrono::milliseconds(grace_ms);
  o.timeout = std::chrono::milliseconds(timeout_s * 1000);
  if (p.has("dashboard-listen") && !p.flag("dashboard")) {
    throw Error("pshard launch: --dashboard-listen goes with --dashboard");
  }
  // The page serves from this process's thread while the job runs and stops when the launch returns.
  std::unique_ptr<report::dashboard::DashboardServer> dashboard;
  std::string dashboard_run_dir;
  if (p.flag("dashboard")) {
    const report::dashboard::ListenAddress at = report::dashboard::parse_listen_address(
        p.has("dashboard-listen") ? p.get("dashboard-listen") : "127.0.0.1:0", "pshard launch --dashboard-listen");
    o.on_run_dir = [&dashboard, &dashboard_run_dir, at](const std::string& run_dir) {
      dashboard =
          std::make_unique<report::dashboard::DashboardServer>(at, report::dashboard::Site{run_dir, new_job_token()});
      dashboard_run_dir = run_dir;
      std::fprintf(stderr, "[launch] dashboard: %s\n", dashboard->url().c_str());
    };
  }
  const int rc = run_local_launch(o);
  if (dashboard) {
    std::fprintf(stderr, "[launch] dashboard closed; `pshard dashboard %s` shows the run\n", dashboard_run_dir.c_str());
  }
  return rc;
}

}  // namespace

PSHARD_COMMAND(launch, "start a whole job (coordinator, servers, workers) on this machine", run_launch);

}  // namespace pshard::app
