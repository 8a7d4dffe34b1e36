// Grid expansion, run naming and the sequential runner of `pshard sweep` / `pshard bench scaling`.
#include "report/sweep.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/config/config.h"
#include "common/error.h"
#include "common/run/run_directory.h"
#include "common/util/child_process.h"
#include "report/csv.h"
#include "report/report.h"

namespace pshard::report {
namespace {

namespace fs = std::filesystem;

bool is_process_key(const std::string& key) { return key == "workers" || key == "servers"; }

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

int64_t parse_count(const std::string& key, const std::string& value) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (errno != 0 || value.empty() || *end != '\0' || v < 1 || v > 4096) {
    throw Error("--grid " + key + ": '" + value + "' is not a process count in 1..4096");
  }
  return v;
}

std::string short_key(const std::string& key) {
  size_t dot = key.find_last_of('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

std::string name_value(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '[' || c == ']' || c == ' ' || c == '"') continue;
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '+' || c == '-';
    out += ok ? c : '-';
  }
  return out.empty() ? "empty" : out;
}

std::string num(const std::optional<double>& v, int digits) {
  if (!v || !std::isfinite(*v)) return "";
  char buf[48];
  if (std::fabs(*v) >= 1e4 && std::fabs(*v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", *v);  // 20457, not 2.046e+04
  } else {
    std::snprintf(buf, sizeof buf, "%.*g", digits, *v);
  }
  return buf;
}

std::string status_of(const SweepRunResult& r) {
  if (!r.error.empty()) return "failed";
  return r.skipped ? "done (earlier)" : "done";
}

// Index of the best finished run: highest final test accuracy, else lowest
// test loss, else lowest train loss; -1 when none has any.
int best_run(const std::vector<SweepRunResult>& runs) {
  std::optional<double> SummaryRecord::*fields[] = {&SummaryRecord::test_acc, &SummaryRecord::test_loss,
                                                    &SummaryRecord::train_loss};
  for (int f = 0; f < 3; ++f) {
    int best = -1;
    double best_value = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (!runs[i].error.empty() || !runs[i].metrics || !runs[i].metrics->summary) continue;
      const std::optional<double>& v = (*runs[i].metrics->summary).*fields[f];
      if (!v || !std::isfinite(*v)) continue;
      bool better = f == 0 ? *v > best_value : *v < best_value;
      if (best < 0 || better) {
        best = static_cast<int>(i);
        best_value = *v;
      }
    }
    if (best >= 0) return best;
  }
  return -1;
}

void write_summary(SweepResult* result, const SweepOptions& o) {
  const std::vector<SweepRunResult>& runs = result->runs;
  std::vector<std::string> keys;
  if (!runs.empty()) {
    for (const auto& kv : runs.front().point.values) keys.push_back(kv.first);
  }
  result->summary_csv = o.out_dir + "/sweep.csv";
  result->summary_md = o.out_dir + "/sweep.md";
  std::ofstream csv(result->summary_csv, std::ios::trunc);
  std::ostringstream md;
  csv << "index,run";
  for (const std::string& k : keys) csv << "," << csv_cell(k);
  csv << ",status,epochs,train_loss,train_acc,test_loss,test_acc,samples_per_s,wall_s,seconds,log\n";
  int best = best_run(runs);
  md << "# pshard sweep\n\nConfig `" << o.config << "`";
  for (const std::string& s : o.sets) md << " `--set " << s << "`";
  if (!o.command.empty()) {
    md << ", workers running `";
    for (size_t i = 0; i < o.command.size(); ++i) md << (i ? " " : "") << o.command[i];
    md << "`";
  }
  md << "; " << runs.size() << " runs, one after another, each in its own directory under `" << o.out_dir
     << "`. Final values are those of the summary line (last epoch); accuracy is a fraction, samples/s counts "
        "training samples of all workers, wall includes evaluation, seconds is the whole process.\n\n";
  if (best >= 0) md << "Best: **" << runs[best].point.name << "**.\n\n";
  md << "| # | run";
  for (const std::string& k : keys) md << " | " << k;
  md << " | status | epochs | train loss | train acc | test loss | test acc | samples/s | wall (s) |\n|---:|---";
  for (size_t i = 0; i < keys.size(); ++i) md << "|---";
  md << "|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const SweepRunResult& r = runs[i];
    SummaryRecord s = r.metrics && r.metrics->summary ? *r.metrics->summary : SummaryRecord{};
    bool have = r.metrics && r.metrics->summary;
    std::string epochs = have ? std::to_string(s.epochs) : "";
    csv << i + 1 << "," << csv_cell(r.point.name);
    for (const auto& kv : r.point.values) csv << "," << csv_cell(kv.second);
    csv << "," << status_of(r) << "," << epochs << "," << num(s.train_loss, 6) << "," << num(s.train_acc, 6) << ","
        << num(s.test_loss, 6) << "," << num(s.test_acc, 6) << "," << num(s.samples_per_s, 6) << "," << num(s.wall_s, 6)
        << "," << num(r.seconds, 4) << "," << csv_cell(r.log) << "\n";
    md << "| " << i + 1 << " | " << (static_cast<int>(i) == best ? "**" + r.point.name + "**" : r.point.name);
    for (const auto& kv : r.point.values) md << " | " << kv.second;
    md << " | " << status_of(r) << (r.error.empty() ? "" : ": " + r.error) << " | " << epochs << " | "
       << num(s.train_loss, 4) << " | " << num(s.train_acc, 4) << " | " << num(s.test_loss, 4) << " | "
       << num(s.test_acc, 4) << " | " << num(s.samples_per_s, 4) << " | " << num(s.wall_s, 4) << " |\n";
  }
  if (!result->report_md.empty()) md << "\nCurves, tables and charts: `report/report.md`.\n";
  if (!result->report_note.empty()) md << "\nReport: " << result->report_note << "\n";
  csv.close();
  if (!csv) throw Error(result->summary_csv + ": write failed");
  std::ofstream out(result->summary_md, std::ios::trunc);
  out << md.str();
  out.close();
  if (!out) throw Error(result->summary_md + ": write failed");
}

// RUN_DIR/sweep_point.json, after the run (a file there before it would move aside with --start-over). No run
// file (run_files_in): a directory that holds only it takes a run.
void write_settings(const std::string& dir, const Json& settings) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir + ": cannot create: " + ec.message());
  const std::string path = dir + "/sweep_point.json";
  std::ofstream out(path, std::ios::trunc);
  out << settings.dump_spaced() << "\n";
  out.close();
  if (!out) throw Error(path + ": write failed");
}

std::string tail_of(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += "    " + all[i] + "\n";
  return out;
}

}  // namespace

GridAxis parse_grid_axis(const std::string& spec) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) throw Error("--grid '" + spec + "': expected KEY=V1,V2,...");
  GridAxis axis;
  axis.key = trim(spec.substr(0, eq));
  std::string current;
  int depth = 0;
  auto finish = [&]() {
    std::string v = trim(current);
    if (v.empty()) throw Error("--grid '" + spec + "': empty value");
    axis.values.push_back(v);
    current.clear();
  };
  for (char c : spec.substr(eq + 1)) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) throw Error("--grid '" + spec + "': unbalanced ']'");
    if (c == ',' && depth == 0) {
      finish();
    } else {
      current += c;
    }
  }
  if (depth != 0) throw Error("--grid '" + spec + "': unbalanced '['");
  finish();
  std::map<std::string, int> seen;
  for (const std::string& v : axis.values) {
    if (seen[v]++) throw Error("--grid '" + spec + "': value '" + v + "' appears twice");
  }
  if (is_process_key(axis.key)) {
    for (const std::string& v : axis.values) parse_count(axis.key, v);
  }
  return axis;
}

std::vector<SweepPoint> expand_grid(const std::vector<GridAxis>& axes) {
  if (axes.empty()) throw Error("sweep: give at least one --grid KEY=V1,V2,...");
  std::map<std::string, int> short_count;
  for (size_t i = 0; i < axes.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (axes[i].key == axes[j].key) throw Error("--grid " + axes[i].key + " is given twice");
    }
    ++short_count[short_key(axes[i].key)];
  }
  size_t total = 1;
  for (const GridAxis& a : axes) {
    total *= a.values.size();
    if (total > 10000) throw Error("sweep: more than 10000 combinations");
  }
  size_t width = std::to_string(total).size();
  std::vector<SweepPoint> points;
  for (size_t index = 0; index < total; ++index) {
    SweepPoint p;
    size_t rest = index;
    std::vector<size_t> pick(axes.size());
    for (size_t a = axes.size(); a-- > 0;) {
      pick[a] = rest % axes[a].values.size();
      rest /= axes[a].values.size();
    }
    std::string number = std::to_string(index + 1);
    p.name = std::string(width - number.size(), '0') + number;
    for (size_t a = 0; a < axes.size(); ++a) {
      const std::string& key = axes[a].key;
      const std::string& value = axes[a].values[pick[a]];
      p.values.emplace_back(key, value);
      if (key == "workers") p.workers = parse_count(key, value);
      if (key == "servers") p.servers = parse_count(key, value);
      std::string shown = short_count[short_key(key)] > 1 ? key : short_key(key);
      p.name += "_" + shown + "=" + name_value(value);
    }
    points.push_back(std::move(p));
  }
  return points;
}

std::vector<std::string> run_command(const SweepOptions& o, const SweepPoint& point, const std::string& pshard,
                                     const std::string& run_dir) {
  int64_t workers = point.workers > 0 ? point.workers : o.workers;
  if (workers <= 0 && !o.command.empty()) workers = 1;  // a program runs as pshard launch's workers
  int64_t servers = point.servers > 0 ? point.servers : (o.servers > 0 ? o.servers : 1);
  if (workers <= 0 && (point.servers > 0 || o.servers > 0)) {
    throw Error("sweep: --servers (or a servers axis) needs --workers or a workers axis (pshard launch)");
  }
  std::vector<std::string> cmd = {pshard};
  if (workers > 0) {
    cmd.insert(cmd.end(), {"launch", "--servers", std::to_string(servers), "--workers", std::to_string(workers)});
  } else {
    cmd.push_back("train");
  }
  cmd.insert(cmd.end(), {"--config", o.config});
  for (const std::string& s : o.sets) cmd.insert(cmd.end(), {"--set", s});
  for (const auto& [key, value] : point.values) {
    if (!is_process_key(key)) cmd.insert(cmd.end(), {"--set", key + "=" + value});
  }
  cmd.insert(cmd.end(), {"--set", "run.name=" + point.name, "--run-dir", run_dir});
  cmd.insert(cmd.end(), o.extra_args.begin(), o.extra_args.end());
  if (!o.command.empty()) {
    cmd.push_back("--");
    cmd.insert(cmd.end(), o.command.begin(), o.command.end());
  }
  return cmd;
}

Json sweep_point_json(const SweepOptions& o, const SweepPoint& point, const std::vector<std::string>& argv) {
  Json values = Json::object();
  for (const auto& [key, value] : point.values) values.set(key, value);
  Json command = Json::array();
  for (const std::string& a : argv) command.push(a);
  const int64_t workers = point.workers > 0 ? point.workers : (o.workers > 0 ? o.workers : (o.command.empty() ? 0 : 1));
  const int64_t servers = workers > 0 ? (point.servers > 0 ? point.servers : (o.servers > 0 ? o.servers : 1)) : 0;
  Json j = Json::object();
  j.set("run", point.name).set("values", values).set("workers", workers).set("servers", servers);
  j.set("command", command);
  return j;
}

SweepResult run_sweep(const std::vector<SweepPoint>& points, const SweepOptions& o,
                      const std::function<void(const std::string&)>& progress) {
  if (o.out_dir.empty()) throw Error("sweep: no output folder");
  if (!(o.run_timeout_s > 0)) throw Error("sweep: the run timeout must be > 0 seconds");
  // Check every combination before starting anything: a typo in the last
  // value should not cost the first runs' time.
  for (const SweepPoint& p : points) {
    std::vector<std::string> sets = o.sets;
    for (const auto& [key, value] : p.values) {
      if (!is_process_key(key)) sets.push_back(key + "=" + value);
    }
    Config::from_file(o.config, sets);
    run_command(o, p, "pshard", "dir");
  }
  std::string pshard = o.pshard.empty() ? self_executable() : o.pshard;
  std::error_code ec;
  fs::create_directories(o.out_dir + "/logs", ec);
  if (ec) throw Error(o.out_dir + ": cannot create: " + ec.message());

  SweepResult result;
  for (size_t i = 0; i < points.size(); ++i) {
    SweepRunResult r;
    r.point = points[i];
    r.dir = o.out_dir + "/" + r.point.name;
    r.log = o.out_dir + "/logs/" + r.point.name + ".log";
    std::string tag = "[" + std::to_string(i + 1) + "/" + std::to_string(points.size()) + "] " + r.point.name;
    if (o.resume && is_run_dir(r.dir)) {
      try {
        RunMetrics m = read_run(r.dir);
        if (m.summary) {
          r.metrics = std::move(m);
          r.skipped = true;
          progress(tag + ": already finished, skipped (--resume)");
          result.runs.push_back(std::move(r));
          continue;
        }
      } catch (const Error&) {
        // unreadable: run it again
      }
    }
    std::vector<std::string> cmd = run_command(o, r.point, pshard, r.dir);
    // A combination run again (a repeated sweep, or an unfinished one under --resume): pshard refuses a run
    // directory that holds a run, so its old files are moved to DIR.old-N.
    if (!run_files_in(r.dir).empty()) {
      const size_t after = o.extra_args.size() + (o.command.empty() ? 0 : o.command.size() + 1);
      cmd.insert(cmd.end() - static_cast<std::ptrdiff_t>(after), "--start-over");
    }
    std::string line;
    for (const std::string& a : cmd) line += (line.empty() ? "" : " ") + a;
    progress(tag + ": " + line);
    std::remove(r.log.c_str());
    { std::ofstream(r.log) << "$ " << line << "\n"; }
    ChildResult c = run_child(cmd, r.log, o.run_timeout_s);
    write_settings(r.dir, sweep_point_json(o, r.point, cmd));
    r.exit_code = c.exit_code;
    r.timed_out = c.timed_out;
    r.seconds = c.seconds;
    if (is_run_dir(r.dir)) {
      try {
        r.metrics = read_run(r.dir);
      } catch (const Error& e) {
        r.error = e.what();
      }
    }
    if (c.timed_out) {
      r.error = "timed out after " + num(o.run_timeout_s, 6) + " s";
    } else if (c.exit_code != 0) {
      r.error = "exit code " + std::to_string(c.exit_code) + ", see " + r.log;
    } else if (r.error.empty() && (!r.metrics || !r.metrics->summary)) {
      r.error = "finished without a summary line in " + r.dir + "/metrics.jsonl";
    }
    if (r.error.empty()) {
      const SummaryRecord& s = *r.metrics->summary;
      std::string what = s.test_acc ? "test_acc " + num(s.test_acc, 4) : "";
      if (s.test_loss) what += (what.empty() ? "" : ", ") + std::string("test_loss ") + num(s.test_loss, 4);
      if (s.train_loss) what += (what.empty() ? "" : ", ") + std::string("train_loss ") + num(s.train_loss, 4);
      progress(tag + ": done in " + num(r.seconds, 3) + " s" + (what.empty() ? "" : ": " + what));
    } else {
      ++result.failed;
      progress(tag + ": FAILED (" + r.error + "); last lines of the log:\n" + tail_of(r.log, 15));
    }
    result.runs.push_back(std::move(r));
  }

  if (o.report) {
    std::vector<std::string> dirs;
    for (const SweepRunResult& r : result.runs) {
      if (r.metrics) dirs.push_back(r.dir);
    }
    if (dirs.empty()) {
      result.report_note = "no run wrote metrics, so there is no report";
    } else {
      try {
        ReportOptions ro;
        ro.out_dir = o.out_dir + "/report";
        ReportResult rep = write_report(dirs, ro);
        result.report_md = rep.report_md;
        if (!rep.plots_drawn) result.report_note = "plots skipped: " + rep.plots_note;
        result.report = std::move(rep);
      } catch (const Error& e) {
        result.report_note = std::string("report failed: ") + e.what();
      }
    }
  }
  write_summary(&result, o);
  return result;
}

}  // namespace pshard::report
