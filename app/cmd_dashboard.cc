// `pshard dashboard RUN_DIR`: the live dashboard of a run that is running or has ended (report/dashboard).
#include <signal.h>

#include <cstdio>
#include <filesystem>

#include "app/command.h"
#include "common/error.h"
#include "common/util/args.h"
#include "common/util/host.h"
#include "report/dashboard/dashboard_server.h"

namespace pshard::app {
namespace {

int run_dashboard(const std::vector<std::string>& args) {
  ArgParser p("pshard dashboard",
              "serve a web page that shows a run as it goes (progress, loss, accuracy, throughput, phases, bytes, "
              "stalls and failures) and as it ended, read from RUN_DIR/metrics.jsonl. The URL carries a random "
              "token; a request without it is refused. Runs until Ctrl-C (docs/OPERATIONS.md, \"Dashboard\")");
  p.allow_positionals("RUN_DIR", "the run directory (of a running or a finished job)");
  p.add_option("listen", "ADDR:PORT", "where to serve the page (0.0.0.0 lets other machines in; port 0: a free one)",
               false, "127.0.0.1:0");
  if (!p.parse(args)) return 0;
  if (p.positionals().size() != 1) throw Error("pshard dashboard: give one RUN_DIR (see --help)");
  const std::string run_dir = std::filesystem::absolute(p.positionals()[0]).lexically_normal().string();
  if (!std::filesystem::is_directory(run_dir)) throw Error("pshard dashboard: no run directory " + run_dir);

  // Ctrl-C and SIGTERM end the wait below instead of the process, so that the server stops cleanly.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before the server's thread starts: it inherits the mask
  report::dashboard::DashboardServer server(
      report::dashboard::parse_listen_address(p.get("listen"), "pshard dashboard --listen"),
      report::dashboard::Site{run_dir, new_job_token()});
  std::printf("dashboard of %s: %s\n(Ctrl-C stops it)\n", run_dir.c_str(), server.url().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  return 0;
}

}  // namespace

PSHARD_COMMAND(dashboard, "a live web page of a run: progress, curves, phases, bytes, failures", run_dashboard);

}  // namespace pshard::app
