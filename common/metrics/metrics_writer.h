// Writes a run directory's metrics.jsonl and metrics.csv (docs/METRICS.md).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "common/util/json.h"

namespace pshard {

// Appends one JSON object per line to DIR/metrics.jsonl, flushed after each
// line so a crashed run keeps what it measured; `epoch` events also become
// rows of DIR/metrics.csv (columns fixed by the first epoch line). Every write
// is checked: the first that fails (a full disk) is logged once with the path,
// that file gets no more lines (at most its last line is torn), and complete()
// turns false: the run's exit status must then say its records are incomplete
// (kExitRecordsIncomplete).
//
//   MetricsWriter m("runs/mlp");
//   m.write(Json::object().set("event", "epoch").set("epoch", 1).set("test_acc", 0.87));
class MetricsWriter {
 public:
  // Creates DIR (and parents) if needed; an existing metrics file is replaced.
  explicit MetricsWriter(const std::string& run_dir);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Throws pshard::Error when `event` is not a line docs/METRICS.md declares (metrics_events::check_event).
  void write(const Json& event);
  // Replaces DIR/name with `text` atomically (e.g. the resolved config.toml).
  void write_file(const std::string& name, const std::string& text) const;
  const std::string& dir() const { return dir_; }
  // False once a write to metrics.jsonl or metrics.csv failed.
  bool complete() const { return jsonl_failed_.empty() && csv_failed_.empty(); }

 private:
  std::string dir_;
  std::FILE* jsonl_ = nullptr;
  std::FILE* csv_ = nullptr;
  std::vector<std::string> csv_columns_;
  std::string jsonl_failed_, csv_failed_;  // why the file stopped being written (empty: it did not)
};

// Creates a directory and its parents; Error names the path on failure (also when a file that is not a
// directory is in the way).
void make_directories(const std::string& path);

}  // namespace pshard
