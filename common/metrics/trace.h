// The timeline of one process for a window of steps (trace.steps): Chrome trace events kept in
// memory while the window runs and written once at the end, with timestamps on the coordinator's
// clock, so that `pshard report` can merge every process's file into one trace.json for Perfetto
// or chrome://tracing (docs/METRICS.md, "Timeline").
//
//   Tracer tracer(TraceWindow::parse("100-120", "trace.steps"), "worker 0");
//   Tracer::name_this_thread(&tracer, 1, "training");
//   if (tracer.traces(step)) tracer.span("forward fc1", "layer", t0, t1);
//   tracer.write("runs/x/trace/worker-0.json", cluster.clock_offset());
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/util/json.h"

namespace pshard {

// Steps [first, last] (both included); empty when last < first (tracing off).
struct TraceWindow {
  int64_t first = 0, last = -1;

  bool empty() const { return last < first; }
  bool contains(int64_t step) const { return step >= first && step <= last; }
  // "A-B" with 0 <= A <= B, or "" (empty). Anything else is a pshard::Error naming `what`.
  static TraceWindow parse(const std::string& text, const std::string& what);
};

// The coordinator's clock minus this process's (steady clocks, nanoseconds), estimated from the
// heartbeat echoes: offset = coordinator time - midpoint of send and receive, from the echo with
// the shortest round trip (its error is at most rtt / 2).
struct ClockOffset {
  int64_t offset_ns = 0;
  int64_t rtt_ns = -1;  // -1: no estimate (the coordinator itself, or no echo yet): offset 0
  int64_t samples = 0;  // echoes seen
};

class Tracer {
 public:
  using Clock = std::chrono::steady_clock;

  Tracer(TraceWindow window, std::string process);
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  const TraceWindow& window() const { return window_; }
  bool traces(int64_t step) const { return window_.contains(step); }
  const std::string& process() const { return process_; }

  // The calling thread's row in this tracer's timeline (0 when never named). One tracer per thread.
  static void name_this_thread(Tracer* tracer, int row, const std::string& name);
  // Names a row that no thread owns (e.g. the requests in flight).
  void name_row(int row, const std::string& name);
  // A span [start, end) on the calling thread's row, or on `row` when >= 0. Thread-safe.
  void span(std::string name, const char* category, Clock::time_point start, Clock::time_point end, Json args = Json(),
            int row = -1);
  size_t size() const;

  // Writes `path` (creating its folder): {"pshard_process", "clock_offset_us", "clock_rtt_us",
  // "clock_samples", "traceEvents": [...]} with timestamps in microseconds on the coordinator's
  // steady clock. Throws pshard::Error naming the file when it cannot be written.
  void write(const std::string& path, const ClockOffset& offset) const;

 private:
  struct Event {
    std::string name;
    const char* category;
    int row;
    Clock::time_point start, end;
    Json args;
  };

  TraceWindow window_;
  std::string process_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
  std::vector<std::pair<int, std::string>> rows_;
};

// Writes RUN_DIR/trace/NAME.json (e.g. "worker-0") and logs it with the clock offset. A failure is
// logged, not thrown: the timeline is lost, the training is not. Returns whether it was written.
bool write_trace_file(const Tracer& tracer, const std::string& run_dir, const std::string& name,
                      const ClockOffset& offset);

}  // namespace pshard
