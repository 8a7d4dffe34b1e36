// The timeline of one process for a window of steps (trace.steps): Chrome trace events kept in
// memory while the window runs and written once at the end, with timestamps on the coordinator's
// clock, so that `pshard report` can merge every process's file into one trace.json for Perfetto
// or chrome://tracing (docs/METRICS.md, "Timeline").
//
//   Tracer tracer(TraceWindow::parse("100-120", "trace.steps"), "worker 0");
//   Tracer::name_this_thread(&tracer, 1, "training");
//   const TraceName forward_fc1 = tracer.name("forward fc1");  // once
//   if (tracer.traces(step)) tracer.span(forward_fc1, "layer", t0, t1, TraceArgs().set("step", step));
//   tracer.write("runs/x/trace/worker-0.json", cluster.clock_offset());
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace pshard {

// Steps [first, last] (both included); empty when last < first (tracing off).
struct TraceWindow {
  int64_t first = 0, last = -1;

  bool empty() const { return last < first; }
  bool contains(int64_t step) const { return step >= first && step <= last; }
  // At most this many steps: every process keeps a window's spans in memory until it writes its trace file.
  static constexpr int64_t kMaxSteps = 1000;
  // "A-B" with 0 <= A <= B and B - A < kMaxSteps, or "" (empty). Anything else is a pshard::Error naming `what`.
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

// A span's name, kept once by its tracer (Tracer::name): recording a span copies no string.
struct TraceName {
  uint32_t id = 0;
};

// A span's arguments ("args" in the trace): up to kMax numbers, literal texts or kept names, and at most one list
// of kept names, held without allocating (only the list allocates): a traced step of a sync job records tens of
// spans per process, many on the servers' socket threads, on the step's critical path.
//
//   tracer.span(aggregate_name, "server", t0, t1, TraceArgs().set("step", 12).set("type", "push").set("slice", n));
class TraceArgs {
 public:
  static constexpr int kMax = 6;

  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  TraceArgs& set(const char* key, T value) {
    Arg& a = add(key, Arg::kNumber);
    a.number = static_cast<double>(value);
    return *this;
  }
  // `literal` must outlive the tracer (a string literal, protocol::type_name()).
  TraceArgs& set(const char* key, const char* literal);
  TraceArgs& set(const char* key, TraceName name);
  TraceArgs& set(const char* key, std::vector<TraceName> names);

  bool empty() const { return count_ == 0 && list_key_ == nullptr; }

 private:
  friend class Tracer;
  struct Arg {
    enum Kind : uint8_t { kNumber, kText, kName } kind;
    const char* key;
    union {
      double number;
      const char* text;
      uint32_t name;
    };
  };
  Arg& add(const char* key, Arg::Kind kind);

  Arg args_[kMax] = {};
  int count_ = 0;
  const char* list_key_ = nullptr;
  std::vector<TraceName> list_;
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
  // `text` kept once (the same TraceName for the same text): callers keep the names of their spans and
  // arguments (a layer's, a tensor's, a slice's) and pass them to span(). Thread-safe.
  TraceName name(const std::string& text);
  // A span [start, end) named `name` (followed by " NUMBER" when number >= 0, e.g. "step 12") on the calling
  // thread's row, or on `row` when >= 0. `category` must be a literal. Thread-safe.
  void span(TraceName name, const char* category, Clock::time_point start, Clock::time_point end,
            TraceArgs args = TraceArgs(), int row = -1, int64_t number = -1);
  size_t size() const;

  // Writes `path` (creating its folder): {"pshard_process", "clock_offset_us", "clock_rtt_us",
  // "clock_samples", "traceEvents": [...]} with timestamps in microseconds on the coordinator's
  // steady clock. Throws pshard::Error naming the file when it cannot be written.
  void write(const std::string& path, const ClockOffset& offset) const;

 private:
  struct Event {
    uint32_t name;
    int row;
    int64_t number;
    const char* category;
    Clock::time_point start, end;
    TraceArgs args;
  };

  TraceWindow window_;
  std::string process_;
  mutable std::mutex mu_;
  std::deque<Event> events_;  // a deque: growing it moves no event (a vector's reallocation stalled a span)
  std::vector<std::pair<int, std::string>> rows_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> name_ids_;
};

// Writes RUN_DIR/trace/NAME.json (e.g. "worker-0") and logs it with the clock offset. A failure is
// logged, not thrown: the timeline is lost, the training is not. Returns whether it was written.
bool write_trace_file(const Tracer& tracer, const std::string& run_dir, const std::string& name,
                      const ClockOffset& offset);

}  // namespace pshard
