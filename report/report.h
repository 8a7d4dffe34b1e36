// `pshard report`: turns run directories into report.md, CSV tables and PNG charts.
#pragma once

#include <string>
#include <vector>

#include "common/metrics/metrics_reader.h"
#include "report/phase_tables.h"
#include "report/tables.h"

namespace pshard::report {

struct ReportOptions {
  std::string out_dir;      // empty: default_report_dir(runs)
  std::string python;       // interpreter for the plots; empty: found automatically
  std::string plot_script;  // tools/plot_report.py; empty: found automatically
  int plot_width = 1000;    // pixels of every chart
  int plot_height = 600;
};

struct ReportResult {
  std::string out_dir;
  std::string report_md;          // path of report.md
  std::vector<std::string> csvs;  // paths of the CSV tables written
  std::vector<std::string> pngs;  // paths of the charts (empty when skipped)
  bool plots_drawn = false;
  std::string plots_note;           // why the plots were skipped, when they were
  std::vector<RunMetrics> runs;     // what was read
  std::vector<std::string> labels;  // one per run
  std::vector<ScalingGroup> scaling;
  std::vector<BatchRow> batch;
  std::vector<StepTimeRow> step_times;  // per worker of every run with logged step times
  std::vector<std::string> timelines;   // merged trace.json of every run with RUN_DIR/trace (trace.steps)
};

// Replaces every path that is not a run directory (no metrics.jsonl) by the
// run directories directly inside it, sorted by name, so `pshard report
// runs/sweep-1` reports every run of a sweep. A path with neither is an Error.
std::vector<std::string> expand_run_dirs(const std::vector<std::string>& paths);

// One run: RUN_DIR/report; several: reports/<YYYYmmdd-HHMMSS> in the current directory.
std::string default_report_dir(const std::vector<std::string>& run_dirs);

// Reads the runs, writes OUT/report.md, OUT/*.csv and OUT/*.png, and OUT/trace.json (one run) or
// OUT/trace-<run>.json (several) for every run that traced steps (report/timeline.h).
//
//   ReportResult r = write_report({"runs/w1", "runs/w2", "runs/w4"}, {});
//   std::printf("%s\n", r.report_md.c_str());   // runs/.../report.md
//   double s4 = r.scaling[0].rows[2].speedup;
ReportResult write_report(const std::vector<std::string>& run_dirs, const ReportOptions& options);

// The scaling table of one group as Markdown (also printed by `pshard bench scaling`).
std::string scaling_markdown(const ScalingGroup& group, const std::vector<std::string>& labels);

}  // namespace pshard::report
