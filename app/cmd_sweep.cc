// `pshard sweep`: one training run per combination of --grid values, then a summary table and a report.
#include <cstdio>
#include <ctime>

#include "app/command.h"
#include "common/error.h"
#include "common/util/args.h"
#include "report/sweep.h"

namespace pshard::app {
namespace {

std::string default_out() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "runs/sweep-%Y%m%d-%H%M%S", &tm);
  return buf;
}

int run_sweep_command(const std::vector<std::string>& args) {
  ArgParser p("pshard sweep",
              "run every combination of --grid values one after another (pshard train, or pshard launch with "
              "--workers), each in its own run directory, then write sweep.md/sweep.csv and a report");
  p.add_option("config", "FILE", "experiment config (TOML)", true);
  p.add_multi("grid", "KEY=V1,V2,...",
              "values of a config key to try; `workers`/`servers` vary the process counts of pshard launch");
  p.add_multi("set", "KEY=VALUE", "override a config key in every run");
  p.add_option("workers", "W", "run each combination with pshard launch and W workers");
  p.add_option("servers", "S", "servers of pshard launch (default 1)");
  p.add_option("out", "DIR", "folder of the runs (default runs/sweep-<timestamp>)");
  p.add_option("run-timeout", "SEC", "stop a run that takes longer", false, "86400");
  p.add_flag("resume", "skip combinations whose run directory already has a summary (finish an interrupted sweep)");
  p.add_flag("no-report", "do not write OUT/report");
  p.add_flag("dry-run", "print the commands and exit");
  p.allow_command(
      "run this program as every worker (pshard launch ... -- CMD, 1 worker unless --workers or a workers axis), "
      "e.g. python3 train.py with pshard.torch; it reads each run's values with ps.config() (PSHARD_SET)");
  if (!p.parse(args)) return 0;

  std::vector<report::GridAxis> axes;
  for (const std::string& g : p.get_all("grid")) axes.push_back(report::parse_grid_axis(g));
  std::vector<report::SweepPoint> points = report::expand_grid(axes);

  report::SweepOptions o;
  o.config = p.get("config");
  o.sets = p.get_all("set");
  o.out_dir = p.has("out") ? p.get("out") : default_out();
  o.workers = p.has("workers") ? p.get_int("workers") : 0;
  o.servers = p.has("servers") ? p.get_int("servers") : 0;
  if (p.has("workers") && o.workers < 1) throw Error("pshard sweep: --workers must be >= 1");
  if (p.has("servers") && o.servers < 1) throw Error("pshard sweep: --servers must be >= 1");
  o.run_timeout_s = p.get_double("run-timeout");
  o.resume = p.flag("resume");
  o.report = !p.flag("no-report");
  o.command = p.command();

  if (p.flag("dry-run")) {
    for (const report::SweepPoint& pt : points) {
      std::string line;
      for (const std::string& a : report::run_command(o, pt, "pshard", o.out_dir + "/" + pt.name)) {
        line += (line.empty() ? "" : " ") + a;
      }
      std::printf("%s\n", line.c_str());
    }
    return 0;
  }
  std::printf("sweep: %zu runs into %s\n", points.size(), o.out_dir.c_str());
  std::fflush(stdout);
  report::SweepResult r = report::run_sweep(points, o, [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  });
  std::printf("summary: %s (%s)\n", r.summary_md.c_str(), r.summary_csv.c_str());
  if (!r.report_md.empty()) std::printf("report: %s\n", r.report_md.c_str());
  if (!r.report_note.empty()) std::printf("report: %s\n", r.report_note.c_str());
  if (r.failed > 0) {
    std::fprintf(stderr, "pshard sweep: %d of %zu runs failed (see %s)\n", r.failed, r.runs.size(),
                 r.summary_md.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

PSHARD_COMMAND(sweep, "run a grid of configs one after another and tabulate the results", run_sweep_command);

}  // namespace pshard::app
