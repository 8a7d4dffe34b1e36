// `pshard sweep`: a grid of config values, one training run per combination, then a summary table.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/metrics/metrics_reader.h"
#include "common/util/json.h"
#include "report/report.h"

namespace pshard::report {

// One --grid: a config key (or `workers` / `servers`, the process counts of
// `pshard launch`) and its values in order.
struct GridAxis {
  std::string key;
  std::vector<std::string> values;
};

// Parses "optimizer.lr=0.001,0.01,0.1". Commas inside [...] do not split, so
// "model.hidden=[256,128],[512]" has two values. Errors name the spec.
GridAxis parse_grid_axis(const std::string& spec);

// One combination: its values (axis order), run directory name and process counts.
struct SweepPoint {
  std::vector<std::pair<std::string, std::string>> values;  // key, value
  std::string name;                                         // "03_name=adam_lr=0.1" (1-based index)
  int64_t workers = 0;                                      // 0: not set by the grid
  int64_t servers = 0;
};

// Every combination, the first axis varying slowest. Names are the index
// (zero-padded) and key=value pairs joined by '_', with keys shortened to
// their last component when that is unambiguous and characters other than
// [A-Za-z0-9.+-] in values replaced by '-'.
//
//   auto points = expand_grid({parse_grid_axis("optimizer.name=sgd,adam"), parse_grid_axis("optimizer.lr=0.1,0.01")});
//   points[1].name == "2_name=sgd_lr=0.01"   (1-based index, zero-padded to the count)
std::vector<SweepPoint> expand_grid(const std::vector<GridAxis>& axes);

struct SweepOptions {
  std::string config;                   // experiment config (TOML)
  std::vector<std::string> sets;        // --set overrides applied to every run (before the grid values)
  std::string out_dir;                  // runs go to OUT/<point name>, logs to OUT/logs/<point name>.log
  int64_t workers = 0;                  // > 0 (or a workers axis): `pshard launch`; otherwise `pshard train`
  int64_t servers = 0;                  // for launch; 0: 1 server
  double run_timeout_s = 86400;         // limit of each run
  bool resume = false;                  // skip points whose run directory already has a summary line
  bool report = true;                   // run `pshard report` over the finished runs into OUT/report
  std::string pshard;                   // the pshard executable; empty: this process's executable
  std::vector<std::string> extra_args;  // appended to every train/launch command line
  // `-- CMD ARGS`: every run is `pshard launch ... -- CMD ARGS` (1 worker unless --workers or a workers axis), the
  // user's program as each worker; it reads the run's values through PSHARD_SET and ps.config().
  std::vector<std::string> command;
};

// The command line of one run: `pshard train` or `pshard launch`, the overrides, then `-- CMD` when given.
std::vector<std::string> run_command(const SweepOptions& options, const SweepPoint& point, const std::string& pshard,
                                     const std::string& run_dir);

struct SweepRunResult {
  SweepPoint point;
  std::string dir, log;
  int exit_code = 0;
  bool timed_out = false, skipped = false;
  double seconds = 0;
  std::optional<RunMetrics> metrics;  // read back after the run (empty if it wrote none)
  std::string error;                  // why the run counts as failed; empty when it finished
};

struct SweepResult {
  std::vector<SweepRunResult> runs;
  std::string summary_md, summary_csv;  // OUT/sweep.md, OUT/sweep.csv
  std::string report_md;                // OUT/report/report.md when a report was written
  std::optional<ReportResult> report;   // its tables (scaling groups, labels...)
  std::string report_note;              // why there is no report / plots were skipped
  int failed = 0;
};

// Checks every combination's config (Error before anything runs), then runs
// the points one after another, writes each run's settings to RUN_DIR/sweep_point.json
// (sweep_point_json), the summary table and the report.
// `progress` receives one line per event ("[2/6] lr=0.01 ... done in 3.1 s").
// RUN_DIR/sweep_point.json of a run: {"run": NAME, "values": {KEY: VALUE...}, "workers": W, "servers": S,
// "command": [ARGV of the run]}, the values as given to --grid (strings).
Json sweep_point_json(const SweepOptions& options, const SweepPoint& point, const std::vector<std::string>& argv);

SweepResult run_sweep(const std::vector<SweepPoint>& points, const SweepOptions& options,
                      const std::function<void(const std::string&)>& progress);

}  // namespace pshard::report
