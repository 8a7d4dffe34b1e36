// Merging and reading the per-process timelines of a run.
#include "report/timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/error.h"
#include "common/util/binary_file.h"

namespace pshard::report {
namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  return binary::read_file(path, "trace file", binary::kMaxTextFileBytes);
}

// coordinator first, then servers, then workers, each by rank.
std::pair<int, int64_t> order_of(const std::string& process) {
  auto rank = [&](const char* role) {
    const std::string prefix = std::string(role) + " ";
    if (process.rfind(prefix, 0) != 0) return int64_t{-1};
    return static_cast<int64_t>(std::strtoll(process.c_str() + prefix.size(), nullptr, 10));
  };
  if (process == "coordinator") return {0, 0};
  if (rank("server") >= 0) return {1, rank("server")};
  if (rank("worker") >= 0) return {2, rank("worker")};
  return {3, 0};
}

TraceEvent event_from(const Json& e, const std::string& where) {
  TraceEvent t;
  try {
    t.name = e.at("name").as_string();
    t.ph = e.at("ph").as_string();
    t.pid = static_cast<int>(e.at("pid").as_int());
    t.tid = e.at("tid").as_int();
    if (e.has("cat")) t.cat = e.at("cat").as_string();
    if (e.has("ts")) t.ts = e.at("ts").as_number();
    if (e.has("dur")) t.dur = e.at("dur").as_number();
    if (e.has("args")) t.args = e.at("args");
  } catch (const Error& err) {
    throw Error(where + ": " + err.what());
  }
  if (t.ph == "X" && !e.has("ts")) throw Error(where + ": a complete event without 'ts'");
  return t;
}

}  // namespace

const TraceProcess* Timeline::process(int pid) const {
  for (const TraceProcess& p : processes) {
    if (p.pid == pid) return &p;
  }
  return nullptr;
}

bool has_trace(const std::string& run_dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(run_dir + "/trace", ec)) {
    if (e.path().extension() == ".json") return true;
  }
  return false;
}

Timeline read_trace_dir(const std::string& run_dir) {
  struct File {
    std::pair<int, int64_t> order;
    std::string path;
    Json doc;
  };
  std::vector<File> files;
  std::vector<std::string> skipped;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(run_dir + "/trace", ec)) {
    if (e.path().extension() != ".json") continue;
    const std::string path = e.path().string();
    // One process's file cut short (it was killed, or the disk filled up) costs that process's row, not the timeline.
    try {
      Json doc = Json::parse(read_all(path), path);
      if (!doc.is_object() || !doc.has("pshard_process") || !doc.has("traceEvents") ||
          !doc.at("pshard_process").is_string() || !doc.at("traceEvents").is_array()) {
        throw Error(path + ": not a pshard trace (no 'pshard_process' and 'traceEvents')");
      }
      for (size_t i = 0; i < doc.at("traceEvents").elements().size(); ++i) {
        (void)event_from(doc.at("traceEvents").elements()[i], path + ": traceEvents[" + std::to_string(i) + "]");
      }
      files.push_back({order_of(doc.at("pshard_process").as_string()), path, std::move(doc)});
    } catch (const Error& err) {
      skipped.push_back(std::string(err.what()) + " (skipped: the timeline lacks this process)");
    }
  }
  if (ec) throw Error(run_dir + "/trace: cannot list: " + ec.message());
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) { return a.order < b.order; });
  Timeline t;
  t.skipped = std::move(skipped);
  int pid = 0;
  for (const File& f : files) {
    TraceProcess p;
    p.pid = ++pid;
    p.name = f.doc.at("pshard_process").as_string();
    if (f.doc.has("clock_offset_us")) p.clock_offset_us = f.doc.at("clock_offset_us").as_number();
    if (f.doc.has("clock_rtt_us") && f.doc.at("clock_rtt_us").is_number()) {
      p.clock_rtt_us = f.doc.at("clock_rtt_us").as_number();
    }
    if (f.doc.has("clock_samples")) p.clock_samples = f.doc.at("clock_samples").as_int();
    t.processes.push_back(p);
    const std::vector<Json>& events = f.doc.at("traceEvents").elements();
    for (size_t i = 0; i < events.size(); ++i) {
      TraceEvent e = event_from(events[i], f.path + ": traceEvents[" + std::to_string(i) + "]");
      e.pid = p.pid;  // each file numbers itself 0
      t.events.push_back(std::move(e));
    }
  }
  return t;
}

void write_timeline(const Timeline& t, const std::string& path) {
  Json events = Json::array();
  Json processes = Json::array();
  for (const TraceProcess& p : t.processes) {
    events.push(Json::object()
                    .set("name", "process_name")
                    .set("ph", "M")
                    .set("pid", p.pid)
                    .set("tid", 0)
                    .set("args", Json::object().set("name", p.name)));
    events.push(Json::object()
                    .set("name", "process_sort_index")
                    .set("ph", "M")
                    .set("pid", p.pid)
                    .set("tid", 0)
                    .set("args", Json::object().set("sort_index", p.pid)));
    processes.push(Json::object()
                       .set("pid", p.pid)
                       .set("name", p.name)
                       .set("clock_offset_us", p.clock_offset_us)
                       .set("clock_rtt_us", p.clock_rtt_us ? Json(*p.clock_rtt_us) : Json())
                       .set("clock_samples", p.clock_samples));
  }
  // Timestamps from the earliest span (a whole microsecond on the coordinator's clock, stored as
  // ts_origin_us): the clock's own values (~1e10 us after a day of uptime) would lose their
  // sub-millisecond digits in JSON's 9 significant digits.
  double origin = 0;
  bool any = false;
  for (const TraceEvent& e : t.events) {
    if (e.ph == "X" && (!any || e.ts < origin)) origin = e.ts;
    any = any || e.ph == "X";
  }
  origin = std::floor(origin);
  for (const TraceEvent& e : t.events) {
    Json j = Json::object().set("name", e.name).set("ph", e.ph).set("pid", e.pid).set("tid", e.tid);
    if (!e.cat.empty()) j.set("cat", e.cat);
    if (e.ph == "X") j.set("ts", e.ts - origin).set("dur", e.dur);
    if (!e.args.is_null()) j.set("args", e.args);
    events.push(std::move(j));
  }
  Json doc = Json::object()
                 .set("displayTimeUnit", "ms")
                 .set("ts_origin_us", std::to_string(static_cast<int64_t>(origin)))  // a string: every digit
                 .set("pshard_processes", processes)
                 .set("traceEvents", events);
  binary::write_file_atomically(path, doc.dump() + "\n", "cannot write the merged trace");
}

Timeline read_timeline(const std::string& path) {
  Json doc = Json::parse(read_all(path), path);
  if (!doc.is_object() || !doc.has("traceEvents") || !doc.at("traceEvents").is_array()) {
    throw Error(path + ": not a Chrome trace (no 'traceEvents' list)");
  }
  Timeline t;
  const std::vector<Json>& events = doc.at("traceEvents").elements();
  for (size_t i = 0; i < events.size(); ++i) {
    TraceEvent e = event_from(events[i], path + ": traceEvents[" + std::to_string(i) + "]");
    if (e.ph == "M" && e.name == "process_name" && e.args.is_object() && e.args.has("name")) {
      TraceProcess p;
      p.pid = e.pid;
      p.name = e.args.at("name").as_string();
      t.processes.push_back(p);
    }
    t.events.push_back(std::move(e));
  }
  if (doc.has("pshard_processes")) {
    for (const Json& q : doc.at("pshard_processes").elements()) {
      for (TraceProcess& p : t.processes) {
        if (p.pid != q.at("pid").as_int()) continue;
        p.clock_offset_us = q.at("clock_offset_us").as_number();
        if (q.at("clock_rtt_us").is_number()) p.clock_rtt_us = q.at("clock_rtt_us").as_number();
        p.clock_samples = q.at("clock_samples").as_int();
      }
    }
  }
  return t;
}

int64_t write_step_spans_csv(const Timeline& t, const std::string& path) {
  std::vector<int64_t> steps;
  for (const TraceEvent& e : t.events) {
    if (e.ph == "X" && e.cat == "step" && e.args.is_object() && e.args.has("step")) {
      steps.push_back(e.args.at("step").as_int());
    }
  }
  if (steps.empty()) return -1;
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  const int64_t step = steps[steps.size() / 2];
  double begin = 0, end = 0;
  bool any = false;
  for (const TraceEvent& e : t.events) {
    if (e.ph != "X" || e.cat != "step" || e.args.at("step").as_int() != step) continue;
    begin = any ? std::min(begin, e.ts) : e.ts;
    end = any ? std::max(end, e.ts + e.dur) : e.ts + e.dur;
    any = true;
  }
  std::map<std::pair<int, int64_t>, std::string> rows;  // (pid, tid) -> thread name
  for (const TraceEvent& e : t.events) {
    if (e.ph == "M" && e.name == "thread_name" && e.args.is_object() && e.args.has("name")) {
      rows[{e.pid, e.tid}] = e.args.at("name").as_string();
    }
  }
  std::ostringstream out;
  out << "lane,name,what,start_ms,dur_ms\n";
  auto cell = [](std::string s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const TraceProcess& p : t.processes) {  // lanes in process order
    for (const TraceEvent& e : t.events) {
      if (e.pid != p.pid || e.ph != "X" || e.ts + e.dur < begin || e.ts > end) continue;
      const auto row = rows.find({e.pid, e.tid});
      const std::string lane = p.name + " / " + (row != rows.end() ? row->second : "row " + std::to_string(e.tid));
      const std::string what = e.cat == "phase" ? e.name : e.name.substr(0, e.name.find(' '));
      // Clipped to the step: a request in flight since the previous step starts at its start.
      const double from = std::max(e.ts, begin), to = std::min(e.ts + e.dur, end);
      char nums[64];
      std::snprintf(nums, sizeof nums, "%.4f,%.4f", (from - begin) / 1e3, (to - from) / 1e3);
      out << cell(lane) << "," << cell(e.name) << "," << cell(what) << "," << nums << "\n";
    }
  }
  binary::write_file_atomically(path, out.str(), "cannot write the step's spans");
  return step;
}

}  // namespace pshard::report
