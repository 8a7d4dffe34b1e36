// Chrome trace events of one process, written on the coordinator's clock.
#include "common/metrics/trace.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "common/error.h"
#include "common/util/binary_file.h"
#include "common/util/json.h"
#include "common/util/log.h"

namespace pshard {
namespace {
thread_local int this_thread_row = 0;
thread_local const Tracer* this_thread_tracer = nullptr;
}  // namespace

TraceWindow TraceWindow::parse(const std::string& text, const std::string& what) {
  TraceWindow w;
  if (text.empty()) return w;
  const size_t dash = text.find('-');
  auto number = [&](const std::string& s, int64_t* out) {
    if (s.empty() || s.size() > 15 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    *out = std::stoll(s);
    return true;
  };
  if (dash == std::string::npos || !number(text.substr(0, dash), &w.first) || !number(text.substr(dash + 1), &w.last) ||
      w.last < w.first) {
    throw Error(what + ": '" + text +
                "' is not a window of steps FIRST-LAST with FIRST <= LAST, like \"100-120\" "
                "(empty: no trace)");
  }
  if (w.last - w.first + 1 > kMaxSteps) {
    throw Error(what + ": '" + text + "' is " + std::to_string(w.last - w.first + 1) + " steps, more than the " +
                std::to_string(kMaxSteps) + " a trace may hold (each process keeps the window's spans in memory): " +
                "trace a shorter window, like \"100-120\"");
  }
  return w;
}

TraceArgs::Arg& TraceArgs::add(const char* key, Arg::Kind kind) {
  if (count_ == kMax)
    throw Error(std::string("trace: a span has more than ") + std::to_string(kMax) + " arguments (" + key + ")");
  Arg& a = args_[count_++];
  a.key = key;
  a.kind = kind;
  return a;
}

TraceArgs& TraceArgs::set(const char* key, const char* literal) {
  add(key, Arg::kText).text = literal;
  return *this;
}

TraceArgs& TraceArgs::set(const char* key, TraceName name) {
  add(key, Arg::kName).name = name.id;
  return *this;
}

TraceArgs& TraceArgs::set(const char* key, std::vector<TraceName> names) {
  list_key_ = key;
  list_ = std::move(names);
  return *this;
}

Tracer::Tracer(TraceWindow window, std::string process) : window_(window), process_(std::move(process)) {}

void Tracer::name_this_thread(Tracer* tracer, int row, const std::string& name) {
  this_thread_tracer = tracer;
  this_thread_row = row;
  if (tracer) tracer->name_row(row, name);
}

void Tracer::name_row(int row, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : rows_) {
    if (r.first == row) return;
  }
  rows_.emplace_back(row, name);
}

TraceName Tracer::name(const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = name_ids_.emplace(text, static_cast<uint32_t>(names_.size()));
  if (added) names_.push_back(text);
  return TraceName{it->second};
}

void Tracer::span(TraceName name, const char* category, Clock::time_point start, Clock::time_point end, TraceArgs args,
                  int row, int64_t number) {
  if (row < 0) row = this_thread_tracer == this ? this_thread_row : 0;
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back({name.id, row, number, category, start, end, std::move(args)});
}

size_t Tracer::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

namespace {

// A number as JSON: integers (steps, bytes, ranks) without a fraction, others with 9 significant digits.
void append_number(std::string& text, double v) {
  char buf[32];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  } else if (std::isfinite(v)) {
    std::snprintf(buf, sizeof buf, "%.9g", v);
  } else {
    std::snprintf(buf, sizeof buf, "null");
  }
  text += buf;
}

}  // namespace

void Tracer::write(const std::string& path, const ClockOffset& offset) const {
  auto us = [&](Clock::time_point t) {
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    return static_cast<double>(ns + offset.offset_ns) / 1e3;
  };
  // Written as text, event by event: a window of many steps holds tens of thousands of spans, and
  // building one Json tree of them first would take several times longer.
  std::string text;
  char buf[160];
  auto event = [&](const std::string& name, int64_t number, const char* cat, const char* ph, int row) {
    text += text.empty() ? "\n" : ",\n";
    text += "{\"name\":";
    text += number < 0 ? Json(name).dump() : Json(name + " " + std::to_string(number)).dump();
    text += ",\"ph\":\"";
    text += ph;
    text += "\",\"pid\":0,\"tid\":" + std::to_string(row);
    if (cat) text += ",\"cat\":" + Json(cat).dump();
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Each kept name as JSON once.
    std::vector<std::string> quoted;
    quoted.reserve(names_.size());
    for (const std::string& n : names_) quoted.push_back(Json(n).dump());
    text.reserve(events_.size() * 160);
    for (const auto& [row, name] : rows_) {
      event("thread_name", -1, nullptr, "M", row);
      text += ",\"args\":{\"name\":" + Json(name).dump() + "}}";
    }
    for (const Event& e : events_) {
      event(names_[e.name], e.number, e.category, "X", e.row);
      std::snprintf(buf, sizeof buf, ",\"ts\":%.3f,\"dur\":%.3f", us(e.start),
                    std::chrono::duration<double, std::micro>(e.end - e.start).count());
      text += buf;
      if (!e.args.empty()) {
        text += ",\"args\":{";
        for (int i = 0; i < e.args.count_; ++i) {
          const TraceArgs::Arg& a = e.args.args_[i];
          if (i > 0) text += ",";
          text += Json(a.key).dump() + ":";
          if (a.kind == TraceArgs::Arg::kNumber) {
            append_number(text, a.number);
          } else if (a.kind == TraceArgs::Arg::kText) {
            text += Json(a.text).dump();
          } else {
            text += quoted[a.name];
          }
        }
        if (e.args.list_key_) {
          if (e.args.count_ > 0) text += ",";
          text += Json(e.args.list_key_).dump() + ":[";
          for (size_t i = 0; i < e.args.list_.size(); ++i) {
            if (i > 0) text += ",";
            text += quoted[e.args.list_[i].id];
          }
          text += "]";
        }
        text += "}";
      }
      text += "}";
    }
  }
  const Json head =
      Json::object()
          .set("pshard_process", process_)
          .set("trace_steps", std::to_string(window_.first) + "-" + std::to_string(window_.last))
          .set("clock_offset_us", static_cast<double>(offset.offset_ns) / 1e3)
          .set("clock_rtt_us", offset.rtt_ns < 0 ? Json() : Json(static_cast<double>(offset.rtt_ns) / 1e3))
          .set("clock_samples", offset.samples);
  std::string doc = head.dump();
  doc.pop_back();  // the closing brace: the events follow
  doc += ",\"traceEvents\":[" + text + "\n]}\n";
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) throw Error(path + ": cannot create its folder: " + ec.message());
  binary::write_file_atomically(path, doc, "cannot write the trace");
}

bool write_trace_file(const Tracer& tracer, const std::string& run_dir, const std::string& name,
                      const ClockOffset& offset) {
  if (run_dir.empty()) {
    PSHARD_LOG(kWarn) << "trace.steps is set but there is no run directory: the timeline is not written";
    return false;
  }
  const std::string path = run_dir + "/trace/" + name + ".json";
  const auto t0 = Tracer::Clock::now();
  try {
    tracer.write(path, offset);
  } catch (const Error& e) {
    PSHARD_LOG(kError) << e.what() << ": the timeline of " << tracer.process() << " is lost";
    return false;
  }
  const double write_ms = std::chrono::duration<double, std::milli>(Tracer::Clock::now() - t0).count();
  PSHARD_LOG(kInfo) << "wrote the timeline of steps " << tracer.window().first << "-" << tracer.window().last << " ("
                    << tracer.size() << " spans, " << write_ms << " ms) to " << path
                    << "; clock offset to the coordinator " << static_cast<double>(offset.offset_ns) / 1e3 << " us"
                    << (offset.rtt_ns >= 0 ? " +- " + std::to_string(offset.rtt_ns / 2000) + " us (" +
                                                 std::to_string(offset.samples) + " heartbeat echoes)"
                                           : std::string(" (no estimate: coordinator clock)"));
  return true;
}

}  // namespace pshard
