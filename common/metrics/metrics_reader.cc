// Parsing of metrics.jsonl and config.toml from a run directory.
#include "common/metrics/metrics_reader.h"

#include <toml++/toml.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/error.h"
#include "common/metrics/event_schema.h"
#include "common/util/binary_file.h"
#include "common/util/json.h"

namespace pshard {
namespace {

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Flattens a TOML node to the text a user would write in --set.
std::string node_text(const toml::node& node) {
  if (node.is_string()) return *node.value<std::string>();
  if (node.is_integer()) return std::to_string(*node.value<int64_t>());
  if (node.is_floating_point()) return format_number(*node.value<double>());
  if (node.is_boolean()) return *node.value<bool>() ? "true" : "false";
  if (const toml::array* arr = node.as_array()) {
    std::string text = "[";
    for (size_t i = 0; i < arr->size(); ++i) text += (i ? ", " : "") + node_text(*arr->get(i));
    return text + "]";
  }
  return "?";  // dates and times do not occur in pshard configs
}

void flatten(const toml::table& table, const std::string& prefix, std::map<std::string, std::string>* out) {
  for (const auto& [name, node] : table) {
    std::string key = prefix.empty() ? std::string(name.str()) : prefix + "." + std::string(name.str());
    if (const toml::table* sub = node.as_table()) {
      flatten(*sub, key, out);
    } else {
      (*out)[key] = node_text(node);
    }
  }
}

std::map<std::string, std::string> read_config(const std::string& path) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  const std::string text = binary::read_file(path, "config", uint64_t{16} << 20);
  try {
    flatten(toml::parse(text, path), "", &out);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << path << ":" << e.source().begin.line << ": " << e.description();
    throw Error(msg.str());
  }
  return out;
}

// Reads fields of one JSON line; every error names the file, the line and the field.
class LineReader {
 public:
  LineReader(const Json& obj, const std::string& where) : obj_(obj), where_(where) {}

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw Error(where_ + ": field '" + field + "': " + why);
  }
  std::optional<double> opt_number(const std::string& field) const {
    if (!obj_.has(field) || obj_.at(field).is_null()) return std::nullopt;
    const Json& v = obj_.at(field);
    if (!v.is_numeric()) fail(field, "expected a number, \"nan\", \"inf\", \"-inf\" or null");
    return v.as_number();
  }
  bool has(const std::string& field) const { return obj_.has(field); }
  double number(const std::string& field) const {
    if (!obj_.has(field)) fail(field, "missing");
    std::optional<double> v = opt_number(field);
    if (!v) fail(field, "expected a number, got null");
    return *v;
  }
  int64_t integer(const std::string& field) const {
    double v = number(field);
    if (v != std::floor(v)) fail(field, "expected an integer, got " + format_number(v));
    return static_cast<int64_t>(v);
  }
  int64_t opt_integer(const std::string& field, int64_t fallback) const {
    if (!obj_.has(field) || obj_.at(field).is_null()) return fallback;
    return integer(field);
  }
  // All the phase fields of `Phase`, or none (an older writer); some but not all is an error.
  template <class Phase>
  std::optional<PhaseSeconds<Phase>> opt_phases() const {
    const auto& names = PhaseSeconds<Phase>::names();
    size_t present = 0;
    for (const char* n : names) present += obj_.has(n) && !obj_.at(n).is_null() ? 1 : 0;
    if (present == 0) return std::nullopt;
    PhaseSeconds<Phase> p;
    for (size_t i = 0; i < names.size(); ++i) p.s[i] = number(names[i]);
    return p;
  }
  const Json& json() const { return obj_; }
  const std::string& where() const { return where_; }
  // The `figures` object of a program's own figures (empty when absent); each a number, or "nan"/"inf"/"-inf".
  std::map<std::string, double> figures() const {
    std::map<std::string, double> out;
    if (!obj_.has("figures") || obj_.at("figures").is_null()) return out;
    if (obj_.at("figures").type() != Json::Type::kObject) fail("figures", "expected an object");
    for (const auto& [name, value] : obj_.at("figures").items()) {
      if (!value.is_numeric()) fail("figures", "'" + name + "' is not a number");
      out[name] = value.as_number();
    }
    return out;
  }
  std::string opt_string(const std::string& field) const {
    if (!obj_.has(field) || obj_.at(field).is_null()) return "";
    const Json& v = obj_.at(field);
    if (v.is_string()) return v.as_string();
    if (v.is_number()) return format_number(v.as_number());
    fail(field, "expected a string");
  }

 private:
  const Json& obj_;
  std::string where_;
};

StepRecord read_step(const LineReader& r) {
  StepRecord s;
  s.epoch = r.integer("epoch");
  s.step = r.integer("step");
  // "nan"/"inf": a diverged run (null in runs recorded before non-finite numbers were written as such).
  if (!r.has("loss")) r.fail("loss", "missing");
  s.loss = r.opt_number("loss").value_or(std::numeric_limits<double>::quiet_NaN());
  s.lr = r.opt_number("lr");
  s.wall_s = r.number("wall_s");
  const int64_t rank = r.opt_integer("rank", 0);
  if (rank < 0 || rank > 0xffffffffLL) r.fail("rank", "out of range");
  s.rank = static_cast<uint32_t>(rank);
  s.step_s = r.opt_number("step_s");
  s.phases = r.opt_phases<WorkerPhase>();
  return s;
}

EpochRecord read_epoch(const LineReader& r) {
  EpochRecord e;
  e.epoch = r.integer("epoch");
  e.step = r.integer("step");
  e.train_loss = r.opt_number("train_loss");
  e.train_acc = r.opt_number("train_acc");
  e.test_loss = r.opt_number("test_loss");
  e.test_acc = r.opt_number("test_acc");
  e.samples_per_s = r.opt_number("samples_per_s");
  e.epoch_s = r.opt_number("epoch_s");
  e.eval_s = r.opt_number("eval_s");
  e.phases = r.opt_phases<WorkerPhase>();
  e.bytes_sent = r.opt_number("bytes_sent");
  e.bytes_recv = r.opt_number("bytes_recv");
  e.fp32_bytes_sent = r.opt_number("fp32_bytes_sent");
  e.fp32_bytes_recv = r.opt_number("fp32_bytes_recv");
  e.wall_s = r.opt_number("wall_s");
  e.gpu_util_pct = r.opt_number("gpu_util_pct");
  e.gpu_mem_peak_bytes = r.opt_number("gpu_mem_peak_bytes");
  e.loss_scale = r.opt_number("loss_scale");
  e.skipped_steps = r.opt_number("skipped_steps");
  e.figures = r.figures();
  return e;
}

SummaryRecord read_summary(const LineReader& r) {
  SummaryRecord s;
  s.test_acc = r.opt_number("test_acc");
  s.test_loss = r.opt_number("test_loss");
  s.train_loss = r.opt_number("train_loss");
  s.train_acc = r.opt_number("train_acc");
  s.samples_per_s = r.opt_number("samples_per_s");
  s.wall_s = r.opt_number("wall_s");
  s.lr = r.opt_number("lr");
  s.phases = r.opt_phases<WorkerPhase>();
  if (r.has("server_phases")) {
    const Json& list = r.json().at("server_phases");
    if (!list.is_array()) r.fail("server_phases", "expected a list");
    for (size_t i = 0; i < list.elements().size(); ++i) {
      const Json& e = list.elements()[i];
      if (!e.is_object()) r.fail("server_phases", "entry " + std::to_string(i) + " is not an object");
      LineReader er(e, r.where() + ": server_phases[" + std::to_string(i) + "]");
      ServerPhasesRecord rec;
      const int64_t rank = er.integer("rank");
      if (rank < 0 || rank > 0xffffffffLL) er.fail("rank", "out of range");
      rec.rank = static_cast<uint32_t>(rank);
      rec.threads = er.integer("threads");
      rec.wall_s = er.number("wall_s");
      std::optional<ServerPhaseSeconds> phases = er.opt_phases<ServerPhase>();
      if (!phases) er.fail(ServerPhaseSeconds::names()[0], "missing");
      rec.phases = *phases;
      s.servers_phases.push_back(rec);
    }
  }
  s.gpu_util_pct = r.opt_number("gpu_util_pct");
  s.gpu_mem_peak_bytes = r.opt_number("gpu_mem_peak_bytes");
  s.loss_scale = r.opt_number("loss_scale");
  s.skipped_steps = r.opt_number("skipped_steps");
  s.figures = r.figures();
  s.bytes_sent = r.opt_number("bytes_sent");
  s.bytes_recv = r.opt_number("bytes_recv");
  s.network_bytes_per_host_step = r.opt_number("network_bytes_per_host_step");
  s.shm_bytes_per_host_step = r.opt_number("shm_bytes_per_host_step");
  s.epochs = r.opt_integer("epochs", 0);
  s.steps = r.opt_integer("steps", 0);
  s.batch_size = r.opt_integer("batch_size", 0);
  s.global_batch = r.opt_integer("global_batch", 0);
  s.model_bytes = r.opt_integer("model_bytes", 0);
  s.workers = r.opt_integer("workers", 1);
  s.servers = r.opt_integer("servers", 0);
  s.model = r.opt_string("model");
  s.optimizer = r.opt_string("optimizer");
  s.mode = r.opt_string("mode");
  return s;
}

}  // namespace

bool is_run_dir(const std::string& dir) {
  std::error_code ec;  // exists, not opened: a FIFO must not block here (read_run refuses it with its name)
  return std::filesystem::exists(dir + "/metrics.jsonl", ec);
}

RunMetrics read_run(const std::string& dir) {
  RunMetrics run;
  run.dir = dir;
  std::string trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  size_t slash = trimmed.find_last_of('/');
  run.name = slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);

  std::string path = trimmed + "/metrics.jsonl";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(path + ": cannot open (is " + dir + " a run directory?)");
  std::istringstream in(binary::read_file(path, "metrics file", binary::kMaxTextFileBytes));
  run.config = read_config(trimmed + "/config.toml");

  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::string where = path + ":" + std::to_string(line_no);
    Json obj;
    try {
      obj = Json::parse(line, where);
    } catch (const Error& e) {
      std::string msg = e.what();
      // Every line the writer finishes ends with a newline: a last line without one was cut short.
      if (!in.eof()) throw Error(msg.find(where) == std::string::npos ? where + ": " + msg : msg);
      run.torn_last_line = where + ": the last line is cut short (its writer stopped mid-line, e.g. on a full " +
                           "disk): skipped, the run's records are incomplete";
      continue;
    }
    if (!obj.is_object()) throw Error(where + ": expected a JSON object");
    if (!obj.has("event") || !obj.at("event").is_string()) throw Error(where + ": missing string field 'event'");
    LineReader r(obj, where);
    const std::string& event = obj.at("event").as_string();
    // An event this version does not declare (a newer writer's) is skipped; a declared one's fields have its types.
    if (!metrics_events::find_event(event)) continue;
    metrics_events::check_event(obj, where, metrics_events::Check::kReadBack);
    if (event == "step") {
      run.steps.push_back(read_step(r));
    } else if (event == "epoch") {
      run.epochs.push_back(read_epoch(r));
    } else if (event == "summary") {
      // An aborted job's summary holds the epochs it finished; the run itself did not finish.
      run.aborted = r.opt_string("aborted");
      if (run.aborted.empty()) run.summary = read_summary(r);
    }
  }
  if (in.bad()) throw Error(path + ": read error");
  return run;
}

}  // namespace pshard
