// `pshard report`: Markdown/CSV tables and PNG charts from run directories.
#include <cstdio>

#include "app/command.h"
#include "common/error.h"
#include "common/metrics/event_schema.h"
#include "common/util/args.h"
#include "report/report.h"

namespace pshard::app {
namespace {

int run_report(const std::vector<std::string>& args) {
  ArgParser p("pshard report",
              "write report.md, CSV tables and PNG charts (convergence, scaling, throughput vs batch size) for runs");
  p.allow_positionals("RUN_DIR...", "run directories (with metrics.jsonl), or folders of them (a sweep's --out)");
  p.add_option("out", "DIR", "where to write (default: RUN_DIR/report for one run, reports/<timestamp> for several)");
  p.add_option("width", "PX", "width of every chart in pixels", false, "1000");
  p.add_option("height", "PX", "height of a one-panel chart in pixels", false, "600");
  p.add_option("python", "PATH",
               "python interpreter with matplotlib (default: $PSHARD_PYTHON, python3, /usr/bin/python3)");
  p.add_flag("events", "print every metrics.jsonl event with its fields (Markdown, as in docs/METRICS.md) and exit");
  if (!p.parse(args)) return 0;
  if (p.has("events")) {
    std::fputs(metrics_events::events_markdown().c_str(), stdout);
    return 0;
  }
  if (p.positionals().empty()) throw Error("pshard report: give at least one RUN_DIR (see --help)");

  report::ReportOptions o;
  o.out_dir = p.has("out") ? p.get("out") : "";
  o.plot_width = static_cast<int>(p.get_int("width"));
  o.plot_height = static_cast<int>(p.get_int("height"));
  o.python = p.has("python") ? p.get("python") : "";
  report::ReportResult r = report::write_report(report::expand_run_dirs(p.positionals()), o);

  std::printf("report of %zu run%s: %s\n", r.runs.size(), r.runs.size() == 1 ? "" : "s", r.report_md.c_str());
  for (const std::string& c : r.csvs) std::printf("  table %s\n", c.c_str());
  for (const std::string& png : r.pngs) std::printf("  chart %s\n", png.c_str());
  if (!r.plots_drawn) std::printf("  plots skipped: %s\n", r.plots_note.c_str());
  for (const report::ScalingGroup& g : r.scaling) {
    std::printf("\nscaling (%s):\n%s", g.title.c_str(), report::scaling_markdown(g, r.labels).c_str());
  }
  return 0;
}

}  // namespace

PSHARD_COMMAND(report, "tables and charts (convergence, scaling, batch size) from run directories", run_report);

}  // namespace pshard::app
