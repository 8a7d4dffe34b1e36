// The merged timeline of a run: every process's RUN_DIR/trace/*.json (trace.steps) in one Chrome
// trace-event file with one process row per pshard process, which Perfetto (ui.perfetto.dev) and
// chrome://tracing load. Timestamps are microseconds on the coordinator's steady clock: each
// process moved its own by the clock offset it estimated (docs/METRICS.md, "Timeline").
//
//   if (has_trace("runs/x")) write_timeline(read_trace_dir("runs/x"), "runs/x/report/trace.json");
//   Timeline t = read_timeline("runs/x/report/trace.json");   // what Perfetto would show
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/util/json.h"

namespace pshard::report {

// One pshard process of the timeline.
struct TraceProcess {
  int pid = 0;                         // its row in the merged file (1 = the coordinator, then servers, workers)
  std::string name;                    // "coordinator", "server 0", "worker 1"
  double clock_offset_us = 0;          // what it added to its clock
  std::optional<double> clock_rtt_us;  // the round trip of its best estimate (none: the coordinator)
  int64_t clock_samples = 0;
};

// One complete ("X") event, or metadata ("M": thread and process names).
struct TraceEvent {
  std::string name, cat, ph;
  double ts = 0, dur = 0;  // microseconds
  int pid = 0;
  int64_t tid = 0;
  Json args;
};

struct Timeline {
  std::vector<TraceProcess> processes;  // by pid
  std::vector<TraceEvent> events;
  std::vector<std::string> skipped;  // read_trace_dir: why each file it left out was unreadable (naming it)
  // The process of `pid`, or nullptr.
  const TraceProcess* process(int pid) const;
};

// True when RUN_DIR/trace holds at least one *.json.
bool has_trace(const std::string& run_dir);
// Every RUN_DIR/trace/*.json, ordered coordinator, servers, workers (by rank). A file that cannot be read or is not
// a pshard trace (torn by a kill or a full disk, a FIFO) is left out, its reason in `skipped`.
Timeline read_trace_dir(const std::string& run_dir);
// Writes `t` as one Chrome trace (JSON object format) with process and thread names.
void write_timeline(const Timeline& t, const std::string& path);
// Reads a file write_timeline wrote (or any Chrome trace in JSON object format).
Timeline read_timeline(const std::string& path);

// One step of `t` as a table for a picture: every span of every process that overlaps the workers'
// `step N` spans of the middle traced step, one row per span with columns lane ("worker 0 / layers"),
// name, what (the phase, or the span's first word: receive, aggregate, update, reply, push_pull,
// forward, backward, step), start_ms (from the step's start) and dur_ms, clipped to the step. Returns the step, or -1
// (no file written) when `t` has no worker step spans.
int64_t write_step_spans_csv(const Timeline& t, const std::string& path);

}  // namespace pshard::report
