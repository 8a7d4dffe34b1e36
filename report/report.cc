// Writes report.md, the CSV tables and the charts of `pshard report`.
#include "report/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/error.h"
#include "report/charts.h"
#include "report/csv.h"
#include "report/phase_tables.h"
#include "report/plots.h"
#include "report/timeline.h"

namespace pshard::report {
namespace {

namespace fs = std::filesystem;

constexpr double kMB = 1e6;
constexpr double kMiB = 1024.0 * 1024.0;  // GPU memory, as nvidia-smi shows it

// A number for a CSV cell ("" when unknown) or a Markdown cell ("n/a").
std::string num(double v, int digits = 6, const char* missing = "") {
  if (!std::isfinite(v)) return missing;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}
// Markdown: large numbers without exponent (20457, not 2.046e+04).
std::string md(double v, int digits = 4) {
  if (std::isfinite(v) && std::fabs(v) >= 1e4 && std::fabs(v) < 1e15) return num(std::round(v), 16);
  return num(v, digits, "n/a");
}
// A measured figure (`missing` when none was measured); a non-finite one (a diverged loss) as nan, inf or -inf.
std::string opt(const std::optional<double>& v, int digits = 6, const char* missing = "") {
  if (v && std::isnan(*v)) return "nan";
  if (v && std::isinf(*v)) return *v > 0 ? "inf" : "-inf";
  if (v && std::string(missing) == "n/a") return md(*v, digits);
  return v ? num(*v, digits, missing) : missing;
}

std::string md_cell(std::string s) {
  for (char& c : s) {
    if (c == '|') c = '/';
  }
  return s;
}

std::string timestamp(const char* format) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

std::string cfg(const RunMetrics& r, const std::string& key, const std::string& fallback) {
  auto it = r.config.find(key);
  return it == r.config.end() ? fallback : it->second;
}

// ---- CSV tables ------------------------------------------------------------

// The names of the programs' own figures (ps.report(figures=...)) in any epoch of any run, sorted: a column each.
std::vector<std::string> figure_names(const std::vector<RunMetrics>& runs) {
  std::set<std::string> names;
  for (const RunMetrics& r : runs) {
    for (const EpochRecord& e : r.epochs) {
      for (const auto& [name, value] : e.figures) names.insert(name);
    }
  }
  return {names.begin(), names.end()};
}

// Figure `name` of `figures`, if it is there.
std::optional<double> figure(const std::map<std::string, double>& figures, const std::string& name) {
  auto it = figures.find(name);
  if (it != figures.end()) return it->second;
  return std::nullopt;
}

// A run's final value of its own figure `name`: its summary's, else its last epoch's.
std::optional<double> final_figure(const RunMetrics& r, const std::string& name) {
  if (r.summary) return figure(r.summary->figures, name);
  return r.epochs.empty() ? std::nullopt : figure(r.epochs.back().figures, name);
}

void write_runs_csv(const std::string& path, const std::vector<RunMetrics>& runs,
                    const std::vector<std::string>& labels) {
  std::vector<std::string> columns = {
      "run",           "dir",        "label",         "model",  "optimizer", "mode",         "workers",
      "servers",       "batch_size", "global_batch",  "epochs", "steps",     "train_loss",   "train_acc",
      "test_loss",     "test_acc",   "samples_per_s", "wall_s", "finished",  "gpu_util_pct", "gpu_mem_peak_mib",
      "skipped_steps", "loss_scale"};
  const std::vector<std::string> figures = figure_names(runs);
  columns.insert(columns.end(), figures.begin(), figures.end());
  CsvFile f(path, columns);
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& r = runs[i];
    const SummaryRecord s = r.summary.value_or(SummaryRecord{});
    std::vector<std::string> row = {r.name,
                                    r.dir,
                                    labels[i],
                                    s.model.empty() ? cfg(r, "model.name", "") : s.model,
                                    s.optimizer.empty() ? cfg(r, "optimizer.name", "") : s.optimizer,
                                    s.mode,
                                    std::to_string(s.workers),
                                    std::to_string(s.servers),
                                    s.batch_size ? std::to_string(s.batch_size) : cfg(r, "train.batch_size", ""),
                                    s.global_batch ? std::to_string(s.global_batch) : "",
                                    std::to_string(r.epochs.size()),
                                    r.epochs.empty() ? "" : std::to_string(r.epochs.back().step),
                                    opt(s.train_loss),
                                    opt(s.train_acc),
                                    opt(s.test_loss),
                                    opt(s.test_acc),
                                    opt(s.samples_per_s),
                                    opt(s.wall_s),
                                    r.summary            ? "yes"
                                    : !r.aborted.empty() ? "aborted"
                                                         : "no",
                                    opt(s.gpu_util_pct),
                                    s.gpu_mem_peak_bytes ? num(*s.gpu_mem_peak_bytes / kMiB) : "",
                                    opt(s.skipped_steps),
                                    opt(s.loss_scale)};
    for (const std::string& name : figures) row.push_back(opt(final_figure(r, name)));
    f.row(row);
  }
  f.close();
}

void write_convergence_csvs(const std::string& steps_path, const std::string& epochs_path,
                            const std::vector<RunMetrics>& runs, const std::vector<std::string>& labels) {
  // The loss curve is worker 0's (every worker logs its steps; their step times are in step_times.csv).
  CsvFile steps(steps_path, {"run", "label", "epoch", "step", "wall_s", "loss", "lr"});
  std::vector<std::string> epoch_columns = {"run",      "label",         "epoch",     "step",
                                            "wall_s",   "train_loss",    "train_acc", "test_loss",
                                            "test_acc", "samples_per_s", "epoch_s"};
  for (const char* n : WorkerPhaseSeconds::names()) epoch_columns.push_back(n);
  epoch_columns.push_back("gpu_util_pct");
  epoch_columns.push_back("gpu_mem_peak_mib");
  epoch_columns.push_back("skipped_steps");
  epoch_columns.push_back("loss_scale");
  const std::vector<std::string> figures = figure_names(runs);
  epoch_columns.insert(epoch_columns.end(), figures.begin(), figures.end());
  CsvFile epochs(epochs_path, epoch_columns);
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const StepRecord& s : runs[i].steps) {
      if (s.rank != 0) continue;
      steps.row({runs[i].name, labels[i], std::to_string(s.epoch), std::to_string(s.step), num(s.wall_s), num(s.loss),
                 opt(s.lr)});
    }
    for (const EpochRecord& e : runs[i].epochs) {
      std::vector<std::string> row = {runs[i].name,           labels[i],        std::to_string(e.epoch),
                                      std::to_string(e.step), opt(e.wall_s),    opt(e.train_loss),
                                      opt(e.train_acc),       opt(e.test_loss), opt(e.test_acc),
                                      opt(e.samples_per_s),   opt(e.epoch_s)};
      for (size_t p = 0; p < WorkerPhaseSeconds::kCount; ++p) row.push_back(e.phases ? num(e.phases->s[p]) : "");
      row.push_back(opt(e.gpu_util_pct));
      row.push_back(e.gpu_mem_peak_bytes ? num(*e.gpu_mem_peak_bytes / kMiB) : "");
      row.push_back(opt(e.skipped_steps));
      row.push_back(opt(e.loss_scale));
      for (const std::string& name : figures) row.push_back(opt(figure(e.figures, name)));
      epochs.row(row);
    }
  }
  steps.close();
  epochs.close();
}

const std::vector<std::string> kScalingColumns = {"group",
                                                  "run",
                                                  "label",
                                                  "workers",
                                                  "servers",
                                                  "epochs",
                                                  "steps",
                                                  "train_s",
                                                  "epoch_s",
                                                  "speedup",
                                                  "ideal_speedup",
                                                  "efficiency",
                                                  "samples_per_s",
                                                  "step_ms",
                                                  "data_ms_per_step",
                                                  "forward_ms_per_step",
                                                  "backward_ms_per_step",
                                                  "comm_ms_per_step",
                                                  "other_ms_per_step",
                                                  "comm_fraction",
                                                  "model_MB",
                                                  "traffic_MB_per_step",
                                                  "ps_bound_MB_per_step",
                                                  "sent_MB_per_worker_step",
                                                  "ps_sent_MB_per_worker_step",
                                                  "ring_MB_per_worker_step",
                                                  "bandwidth_MBps",
                                                  "bandwidth_per_worker_MBps",
                                                  "fp32_traffic_MB_per_step",
                                                  "traffic_vs_fp32",
                                                  "host_network_MB_per_step",
                                                  "host_shm_MB_per_step"};

void write_scaling_csv(const std::string& path, const std::vector<ScalingGroup>& groups,
                       const std::vector<RunMetrics>& runs, const std::vector<std::string>& labels) {
  CsvFile f(path, kScalingColumns);
  for (const ScalingGroup& g : groups) {
    double base_workers = static_cast<double>(g.rows.front().workers);
    for (const ScalingRow& r : g.rows) {
      f.row({g.title,
             runs[r.run].name,
             labels[r.run],
             std::to_string(r.workers),
             std::to_string(r.servers),
             std::to_string(r.epochs),
             std::to_string(r.steps),
             num(r.train_s),
             num(r.epoch_s),
             num(r.speedup),
             num(static_cast<double>(r.workers) / base_workers),
             num(r.efficiency),
             num(r.samples_per_s),
             num(r.step_s * 1e3),
             num(r.phases_per_step[WorkerPhase::kData] * 1e3),
             num(r.phases_per_step[WorkerPhase::kForward] * 1e3),
             num(r.phases_per_step[WorkerPhase::kBackward] * 1e3),
             num(r.phases_per_step[WorkerPhase::kCommWait] * 1e3),
             num(r.phases_per_step[WorkerPhase::kOther] * 1e3),
             num(r.phases_per_step[WorkerPhase::kCommWait] / r.step_s),
             num(r.model_bytes / kMB),
             num(r.traffic_bytes_per_step / kMB),
             num(r.ps_bound_bytes_per_step / kMB),
             num(r.sent_bytes_per_worker_step / kMB),
             num(r.model_bytes / kMB),
             num(r.ring_bytes_per_worker_step / kMB),
             num(r.bandwidth_bytes_per_s / kMB),
             num(r.bandwidth_per_worker_bytes_per_s / kMB),
             num(r.fp32_traffic_bytes_per_step / kMB),
             num(r.traffic_vs_fp32),
             num(r.host_network_bytes_per_step / kMB),
             num(r.host_shm_bytes_per_step / kMB)});
    }
  }
  f.close();
}

// Every logged step of every worker (the step-time distribution behind step_times_markdown).
void write_step_times_csv(const std::string& path, const std::vector<RunMetrics>& runs,
                          const std::vector<std::string>& labels) {
  std::vector<std::string> columns = {"run", "label", "worker", "series", "epoch", "step", "step_ms"};
  for (const char* n : WorkerPhaseSeconds::names()) columns.push_back(std::string(n, std::strlen(n) - 2) + "_ms");
  CsvFile f(path, columns);
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const StepRecord& s : runs[i].steps) {
      if (!s.step_s) continue;
      std::vector<std::string> row = {
          runs[i].name,
          labels[i],
          std::to_string(s.rank),
          (runs.size() > 1 ? labels[i] + " " : std::string()) + "worker " + std::to_string(s.rank),
          std::to_string(s.epoch),
          std::to_string(s.step),
          num(*s.step_s * 1e3)};
      for (size_t p = 0; p < WorkerPhaseSeconds::kCount; ++p) row.push_back(s.phases ? num(s.phases->s[p] * 1e3) : "");
      f.row(row);
    }
  }
  f.close();
}

void write_batch_csv(const std::string& path, const std::vector<BatchRow>& rows, const std::vector<RunMetrics>& runs,
                     const std::vector<std::string>& labels) {
  CsvFile f(path, {"run", "label", "workers", "workers_label", "batch_size", "global_batch", "samples_per_s", "step_ms",
                   "train_loss", "test_loss", "test_acc"});
  for (const BatchRow& b : rows) {
    f.row({runs[b.run].name, labels[b.run], std::to_string(b.workers), "W=" + std::to_string(b.workers),
           std::to_string(b.batch_size), std::to_string(b.global_batch), num(b.samples_per_s), num(b.step_s * 1e3),
           num(b.train_loss), num(b.test_loss), num(b.test_acc)});
  }
  f.close();
}

// ---- report.md -------------------------------------------------------------

const char* kScalingDefinitions =
    R"(Definitions (W = workers of a run, W0 = fewest workers in the group, M = model bytes;
1 MB = 10^6 bytes; per-step values divide run totals by the number of synchronous steps each worker made):

| column | meaning | unit |
| --- | --- | --- |
| W, S | workers and servers of the run | count |
| epoch time | training seconds per epoch (sum of `epoch_s` / epochs; evaluation excluded) | s |
| speedup | epoch time(W0) / epoch time(W); with W0 = 1 this is T1/TW | x |
| efficiency | speedup x W0 / W (1 = perfect linear scaling) | fraction |
| samples/s | training samples per second, all workers together | samples/s |
| step | training seconds per step (the slowest worker's epochs) | ms |
| data | waiting for the next batch, per step (measured, mean over workers) | ms |
| fwd, bwd | forward and backward pass per step, waits for communication excluded (measured, mean over workers) | ms |
| comm | blocked waiting for push/pull per step (measured, mean over workers) | ms |
| other | the rest of the step, measured as such: bookkeeping, issuing requests, a local optimizer step (mean over workers) | ms |
| traffic/step | payload bytes sent + received by all workers per step, as they went on the wire (after compression) | MB |
| fp32/step | the same payloads as float32: what `cluster.compression = none` and `pull_precision = fp32` would move | MB |
| vs fp32 | traffic/step / fp32/step (1: no compression; 0.5: fp16/bf16 both ways) | x |
| PS bound/step | 2 x M x W: every worker pushes its gradient and pulls the model once per step | MB |
| sent/worker/step | payload bytes one worker sends per step (mean) | MB |
| ring/worker/step | 2(W-1)/W x M: what each worker sends (and receives) per step in a ring all-reduce | MB |
| bandwidth | (bytes sent + received by all workers) / training seconds | MB/s |
| bw/worker | bandwidth / W | MB/s |
| net/host/step | payload bytes through sockets per step of the busiest host (sent + received): with one push per host (`cluster.host_aggregation`) about 2 x M whatever the host's workers | MB |
| shm/host/step | the same host's bytes through shared memory per step | MB |
)";

std::string png_line(const PlotOutcome& plots, const std::string& png, const std::string& alt) {
  for (const std::string& p : plots.pngs) {
    if (p.size() >= png.size() && p.compare(p.size() - png.size(), png.size(), png) == 0) {
      return "![" + alt + "](" + png + ")\n\n";
    }
  }
  return "";
}

}  // namespace

std::string scaling_markdown(const ScalingGroup& g, const std::vector<std::string>& labels) {
  std::ostringstream out;
  out << "| run | W | S | epoch time (s) | speedup | efficiency | samples/s | step (ms) | data (ms) | fwd (ms) | "
         "bwd (ms) | comm (ms) | other (ms) | traffic/step (MB) | fp32/step (MB) | vs fp32 | PS bound/step (MB) | "
         "sent/worker/step (MB) | "
         "ring/worker/step (MB) | bandwidth (MB/s) | bw/worker (MB/s) | net/host/step (MB) | shm/host/step (MB) |\n";
  out << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
         "|---:"
         "|\n";
  for (const ScalingRow& r : g.rows) {
    out << "| " << md_cell(labels[r.run]) << " | " << r.workers << " | " << r.servers << " | " << md(r.epoch_s) << " | "
        << md(r.speedup, 3) << " | " << md(r.efficiency, 3) << " | " << md(r.samples_per_s) << " | "
        << md(r.step_s * 1e3) << " | ";
    for (double v : r.phases_per_step.s) out << md(v * 1e3) << " | ";
    out << md(r.traffic_bytes_per_step / kMB) << " | " << md(r.fp32_traffic_bytes_per_step / kMB) << " | "
        << md(r.traffic_vs_fp32, 3) << " | " << md(r.ps_bound_bytes_per_step / kMB) << " | "
        << md(r.sent_bytes_per_worker_step / kMB) << " | " << md(r.ring_bytes_per_worker_step / kMB) << " | "
        << md(r.bandwidth_bytes_per_s / kMB) << " | " << md(r.bandwidth_per_worker_bytes_per_s / kMB) << " | "
        << md(r.host_network_bytes_per_step / kMB) << " | " << md(r.host_shm_bytes_per_step / kMB) << " |\n";
  }
  return out.str();
}

std::vector<std::string> expand_run_dirs(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    if (is_run_dir(p)) {
      out.push_back(p);
      continue;
    }
    std::error_code ec;
    if (!fs::is_directory(p, ec)) throw Error(p + ": not a run directory (no metrics.jsonl) and not a folder of runs");
    std::vector<std::string> inner;
    for (const fs::directory_entry& e : fs::directory_iterator(p, ec)) {
      if (e.is_directory() && is_run_dir(e.path().string())) inner.push_back(e.path().string());
    }
    if (ec) throw Error(p + ": cannot list: " + ec.message());
    if (inner.empty()) throw Error(p + ": no metrics.jsonl in it nor in any folder directly inside it");
    std::sort(inner.begin(), inner.end());
    out.insert(out.end(), inner.begin(), inner.end());
  }
  return out;
}

std::string default_report_dir(const std::vector<std::string>& run_dirs) {
  if (run_dirs.size() == 1) {
    std::string d = run_dirs.front();
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    return d + "/report";
  }
  return "reports/" + timestamp("%Y%m%d-%H%M%S");
}

namespace {

// ---- the report's parts -----------------------------------------------------

// OUT/NAME.
std::string out_path(const ReportResult& res, const std::string& name) { return res.out_dir + "/" + name; }

// The CSV tables: runs and convergence always, scaling, batch and step times when there are rows for them; their
// paths go to res->csvs.
void write_tables(ReportResult* res) {
  const std::vector<RunMetrics>& runs = res->runs;
  auto path = [&](const std::string& name) { return out_path(*res, name); };
  write_runs_csv(path("runs.csv"), runs, res->labels);
  write_convergence_csvs(path("convergence_steps.csv"), path("convergence_epochs.csv"), runs, res->labels);
  res->csvs = {path("runs.csv"), path("convergence_steps.csv"), path("convergence_epochs.csv")};
  if (!res->scaling.empty()) {
    write_scaling_csv(path("scaling.csv"), res->scaling, runs, res->labels);
    res->csvs.push_back(path("scaling.csv"));
  }
  if (!res->batch.empty()) {
    write_batch_csv(path("batch.csv"), res->batch, runs, res->labels);
    res->csvs.push_back(path("batch.csv"));
  }
  if (!res->step_times.empty()) {
    write_step_times_csv(path("step_times.csv"), runs, res->labels);
    res->csvs.push_back(path("step_times.csv"));
  }
}

// What report.md says of one run's timeline, and the chart of its middle traced step ("" when none).
struct TraceSummary {
  std::string text, png;
};

// Every run that traced steps: its merged trace.json (res->timelines), and a picture of its middle traced step
// (its CSV to res->csvs, its chart to *step_charts).
std::vector<TraceSummary> write_timelines(ReportResult* res, const ReportOptions& options,
                                          std::vector<PlotChart>* step_charts) {
  const std::vector<RunMetrics>& runs = res->runs;
  auto path = [&](const std::string& name) { return out_path(*res, name); };
  std::vector<TraceSummary> traces;
  for (const RunMetrics& r : runs) {
    if (!has_trace(r.dir)) continue;
    const std::string suffix = runs.size() == 1 ? "" : "-" + r.name;
    const std::string name = "trace" + suffix + ".json";
    const Timeline t = read_trace_dir(r.dir);
    for (const std::string& why : t.skipped) std::fprintf(stderr, "pshard report: warning: %s\n", why.c_str());
    write_timeline(t, path(name));
    res->timelines.push_back(path(name));
    std::ostringstream text;
    text << "`" << name << "` (" << md_cell(r.name) << "): " << t.events.size() << " events of " << t.processes.size()
         << " processes; clock offsets to the coordinator:";
    for (size_t i = 0; i < t.processes.size(); ++i) {
      const TraceProcess& p = t.processes[i];
      text << (i ? ", " : " ") << p.name << " " << md(p.clock_offset_us) << " us"
           << (p.clock_rtt_us ? " (+- " + md(*p.clock_rtt_us / 2) + ")" : "");
    }
    text << ".\n\n";
    for (const std::string& why : t.skipped) text << "Left out of the timeline: " << md_cell(why) << ".\n\n";
    TraceSummary summary{text.str(), ""};
    const std::string spans_csv = "timeline_step" + suffix + ".csv";
    const int64_t step = write_step_spans_csv(t, path(spans_csv));
    if (step >= 0) {
      res->csvs.push_back(path(spans_csv));
      int lanes = 0;
      for (const TraceEvent& e : t.events) lanes += e.ph == "M" && e.name == "thread_name" ? 1 : 0;
      PlotChart c;
      c.png = "timeline_step" + suffix + ".png";
      c.title = "Step " + std::to_string(step) + " of " + r.name + " in every process (" + spans_csv + ")";
      c.width = options.plot_width * 3 / 2;
      c.height = std::max(options.plot_height, 28 * lanes + 160);
      PlotLayer l = layer(spans_csv, "start_ms", "dur_ms", "lane", "what");
      c.panels = {
          panel("spans on the coordinator's clock, from the start of the step", "time (ms)", "", {l}, "timeline")};
      step_charts->push_back(c);
      summary.png = c.png;
    }
    traces.push_back(summary);
  }
  return traces;
}

// Every chart (convergence, scaling, batch, step times, then the traced steps), drawn into OUT; what was drawn, or
// why not, goes to res.
PlotOutcome draw_report_charts(ReportResult* res, const ReportOptions& options,
                               const std::vector<PlotChart>& step_charts) {
  ReportOptions o = options;
  std::vector<PlotChart> charts = convergence_charts(res->runs, o);
  std::vector<PlotChart> sc = scaling_charts(res->scaling, o);
  charts.insert(charts.end(), sc.begin(), sc.end());
  if (!res->batch.empty()) charts.push_back(batch_chart(o));
  if (!res->step_times.empty()) charts.push_back(step_time_chart(o));
  charts.insert(charts.end(), step_charts.begin(), step_charts.end());
  PlotOutcome plots = draw_charts(charts, res->out_dir, options.python, options.plot_script);
  res->plots_drawn = plots.drawn;
  res->plots_note = plots.note;
  res->pngs = plots.pngs;
  return plots;
}

// The text of report.md.
std::string report_markdown(const ReportResult& res, const PlotOutcome& plots,
                            const std::vector<TraceSummary>& traces) {
  const std::vector<RunMetrics>& runs = res.runs;
  std::ostringstream m;
  m << "# pshard report\n\n"
    << "Generated " << timestamp("%Y-%m-%d %H:%M:%S") << " by `pshard report` from " << runs.size() << " run"
    << (runs.size() == 1 ? "" : "s") << ". Tables: "
    << "`runs.csv`, `convergence_steps.csv`, `convergence_epochs.csv`" << (res.scaling.empty() ? "" : ", `scaling.csv`")
    << (res.batch.empty() ? "" : ", `batch.csv`") << (res.step_times.empty() ? "" : ", `step_times.csv`") << ".\n\n";
  if (!plots.drawn) m << "**Plots were skipped:** " << plots.note << ".\n\n";
  std::vector<std::string> keys = differing_keys(runs);
  if (runs.size() > 1) {
    std::set<int64_t> worker_counts;
    for (const RunMetrics& r : runs) worker_counts.insert(r.summary ? r.summary->workers : 1);
    if (worker_counts.size() > 1) keys.insert(keys.begin(), "workers (W)");
    m << "Runs differ in: ";
    if (keys.empty()) m << "nothing but their names";
    for (size_t i = 0; i < keys.size(); ++i) m << (i ? ", " : "") << "`" << keys[i] << "`";
    m << ".\n\n";
  }
  m << "## Runs\n\n"
    << "Final values are those of the last epoch; accuracy is a fraction (0..1); samples/s counts training samples "
       "of all workers per training second; wall time includes evaluation; GPU util is the mean NVML utilisation of "
       "the workers' GPUs over the training time, GPU mem the highest memory use of one of them (n/a: no worker "
       "sampled a GPU). Figures of the programs' own (`ps.report(figures=...)`) follow under their names.\n\n"
    << "| run | label | model | optimizer | mode | W | S | batch/worker | epochs | steps | train loss | test loss | "
       "test acc | samples/s | wall (s) | GPU util (%) | GPU mem (MiB) |";
  const std::vector<std::string> figures = figure_names(runs);
  for (const std::string& name : figures) m << " " << md_cell(name) << " |";
  m << "\n|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
  for (size_t i = 0; i < figures.size(); ++i) m << "---:|";
  m << "\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& r = runs[i];
    const SummaryRecord s = r.summary.value_or(SummaryRecord{});
    const EpochRecord* last = r.epochs.empty() ? nullptr : &r.epochs.back();
    m << "| " << md_cell(r.name)
      << (r.summary            ? ""
          : !r.aborted.empty() ? " (aborted)"
                               : " (unfinished)")
      << " | " << md_cell(res.labels[i]) << " | " << (s.model.empty() ? cfg(r, "model.name", "?") : s.model) << " | "
      << (s.optimizer.empty() ? cfg(r, "optimizer.name", "?") : s.optimizer) << " | " << (s.mode.empty() ? "?" : s.mode)
      << " | " << s.workers << " | " << s.servers << " | "
      << (s.batch_size ? std::to_string(s.batch_size) : cfg(r, "train.batch_size", "?")) << " | " << r.epochs.size()
      << " | " << (last ? std::to_string(last->step) : "0") << " | " << (last ? opt(last->train_loss, 4, "n/a") : "n/a")
      << " | " << (last ? opt(last->test_loss, 4, "n/a") : "n/a") << " | "
      << (last ? opt(last->test_acc, 4, "n/a") : "n/a") << " | " << opt(s.samples_per_s, 4, "n/a") << " | "
      << opt(s.wall_s, 4, "n/a") << " | " << opt(s.gpu_util_pct, 3, "n/a") << " | "
      << (s.gpu_mem_peak_bytes ? num(*s.gpu_mem_peak_bytes / kMiB) : "n/a") << " |";
    for (const std::string& name : figures) m << " " << opt(final_figure(r, name), 4, "n/a") << " |";
    m << "\n";
  }
  m << "\n## Convergence\n\n";
  m << png_line(plots, "loss_vs_step.png", "training loss vs step")
    << png_line(plots, "loss_vs_epoch.png", "loss vs epoch") << png_line(plots, "loss_vs_time.png", "loss vs time")
    << png_line(plots, "accuracy_vs_epoch.png", "accuracy vs epoch");
  m << "Per-epoch numbers of every run: `convergence_epochs.csv`; logged steps: `convergence_steps.csv`.\n\n";

  m << "## Scaling\n\n";
  if (res.scaling.empty()) {
    m << "No scaling table: it needs finished runs with the same configuration and at least two different worker "
         "counts (e.g. `pshard bench scaling --workers 1,2,4,8 --config FILE`).\n\n";
  } else {
    m << kScalingDefinitions << "\n";
    for (size_t gi = 0; gi < res.scaling.size(); ++gi) {
      const ScalingGroup& g = res.scaling[gi];
      std::string suffix = res.scaling.size() > 1 ? "_" + std::to_string(gi + 1) : "";
      m << "### " << md_cell(g.title) << "\n\n" << scaling_markdown(g, res.labels) << "\n";
      m << png_line(plots, "scaling" + suffix + ".png", "scaling")
        << png_line(plots, "bandwidth" + suffix + ".png", "bandwidth");
    }
  }
  m << "## Where the time goes\n\n";
  if (res.step_times.empty()) {
    m << "No step times: the runs logged no `step` lines with phase times (`train.log_every` = 0, or an older "
         "pshard).\n\n";
  } else {
    m << "Step time of every worker, from its logged steps (one every `train.log_every` steps; p50/p99: "
         "nearest-rank percentiles), and the mean of each measured phase over the same steps (ms; docs/METRICS.md): "
         "the straggler picture that epoch means hide. Every logged step: `step_times.csv`.\n\n"
      << step_times_markdown(res.step_times, runs, res.labels) << "\n"
      << png_line(plots, "step_times.png", "step time of every worker");
  }
  const std::string servers = server_phases_markdown(runs, res.labels);
  if (!servers.empty()) {
    m << "Servers: share of their threads' time (threads x wall) in each phase over the whole run (docs/METRICS.md: "
         "recv = receiving and checking requests, aggregate = taking pushes in and answering pulls, update = the "
         "optimizer, reply = sending replies, idle = waiting for work).\n\n"
      << servers << "\n";
  }
  if (!res.timelines.empty()) {
    m << "### Timeline\n\nThe traced steps (`trace.steps`) of every process in one Chrome trace: open it in "
         "https://ui.perfetto.dev or chrome://tracing. One process row per pshard process; timestamps on the "
         "coordinator's clock (each process's offset estimated from its heartbeat echoes, +- half the round trip).\n\n";
    for (const TraceSummary& t : traces) {
      m << t.text << (t.png.empty() ? "" : png_line(plots, t.png, "one traced step in every process"));
    }
  }
  m << "## Throughput vs batch size\n\n";
  if (res.batch.empty()) {
    m << "No batch-size table: it needs finished runs with at least two different global batch sizes.\n\n";
  } else {
    m << "Global batch = batch per worker x W. samples/s: training samples per second, all workers. step: training "
         "seconds per step (ms). Losses and accuracy: last epoch.\n\n"
      << "| run | W | batch/worker | global batch | samples/s | step (ms) | train loss | test loss | test acc |\n"
      << "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const BatchRow& b : res.batch) {
      m << "| " << md_cell(res.labels[b.run]) << " | " << b.workers << " | " << b.batch_size << " | " << b.global_batch
        << " | " << md(b.samples_per_s) << " | " << md(b.step_s * 1e3) << " | " << md(b.train_loss) << " | "
        << md(b.test_loss) << " | " << md(b.test_acc) << " |\n";
    }
    m << "\n" << png_line(plots, "throughput_vs_batch.png", "throughput vs batch size");
  }
  return m.str();
}

}  // namespace

ReportResult write_report(const std::vector<std::string>& run_dirs, const ReportOptions& options) {
  if (run_dirs.empty()) throw Error("report: no run directories given");
  if (options.plot_width < 100 || options.plot_height < 100 || options.plot_width > 10000 ||
      options.plot_height > 10000) {
    throw Error("report: plot size " + std::to_string(options.plot_width) + "x" + std::to_string(options.plot_height) +
                " is outside 100..10000 pixels");
  }
  ReportResult res;
  for (const std::string& d : run_dirs) {
    res.runs.push_back(read_run(d));
    if (!res.runs.back().torn_last_line.empty()) {
      std::fprintf(stderr, "pshard report: warning: %s\n", res.runs.back().torn_last_line.c_str());
    }
  }
  res.out_dir = options.out_dir.empty() ? default_report_dir(run_dirs) : options.out_dir;
  std::error_code ec;
  fs::create_directories(res.out_dir, ec);
  if (ec) throw Error(res.out_dir + ": cannot create the report folder: " + ec.message());

  res.labels = run_labels(res.runs);
  res.scaling = scaling_groups(res.runs);
  res.batch = batch_rows(res.runs);
  res.step_times = step_time_rows(res.runs);

  write_tables(&res);
  std::vector<PlotChart> step_charts;
  const std::vector<TraceSummary> traces = write_timelines(&res, options, &step_charts);
  const PlotOutcome plots = draw_report_charts(&res, options, step_charts);
  res.report_md = out_path(res, "report.md");
  std::ofstream f(res.report_md, std::ios::trunc);
  f << report_markdown(res, plots, traces);
  f.close();
  if (!f) throw Error(res.report_md + ": write failed");
  return res;
}

}  // namespace pshard::report
