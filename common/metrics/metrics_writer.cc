// Run-directory metrics: JSON lines plus a CSV of the epoch events.
#include "common/metrics/metrics_writer.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/metrics/event_schema.h"
#include "common/util/binary_file.h"
#include "common/util/log.h"

namespace pshard {

void make_directories(const std::string& path) {
  if (path.empty()) return;
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0) {
      struct stat st {};
      if (errno != EEXIST) throw Error("cannot create directory " + partial + ": " + std::strerror(errno));
      if (::stat(partial.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
        throw Error("cannot create directory " + partial + ": a file of that name exists and is not a directory");
      }
    }
  }
}

MetricsWriter::MetricsWriter(const std::string& run_dir) : dir_(run_dir) {
  make_directories(dir_);
  std::string jsonl = dir_ + "/metrics.jsonl";
  jsonl_ = std::fopen(jsonl.c_str(), "w");
  if (!jsonl_) throw Error("cannot write " + jsonl + ": " + std::strerror(errno));
  std::string csv = dir_ + "/metrics.csv";
  csv_ = std::fopen(csv.c_str(), "w");
  if (!csv_) {
    std::fclose(jsonl_);
    throw Error("cannot write " + csv + ": " + std::strerror(errno));
  }
}

MetricsWriter::~MetricsWriter() {
  if (jsonl_) std::fclose(jsonl_);
  if (csv_) std::fclose(csv_);
}

namespace {
// Writes `text` and flushes it; on failure logs once (naming the file), closes it and remembers why.
void append_checked(std::FILE*& f, const std::string& path, const std::string& text, std::string* failed) {
  if (!f) return;
  errno = 0;
  if (std::fputs(text.c_str(), f) >= 0 && std::fflush(f) == 0) return;
  *failed = errno != 0 ? std::strerror(errno) : "write error";
  PSHARD_LOG(kError) << "metrics " << path << ": write failed: " << *failed
                     << "; no more lines go to it, the run's records are incomplete";
  std::fclose(f);
  f = nullptr;
}
std::string csv_cell(const Json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.as_string();
  if (v.is_number()) {
    const std::string text = v.dump();  // a non-finite number: "nan" with its quotes, written without them
    return text.front() == '"' ? text.substr(1, text.size() - 2) : text;
  }
  if (v.type() == Json::Type::kBool) return v.as_bool() ? "true" : "false";
  return "";  // nested values (per-worker lists) stay in the JSON lines only
}
}  // namespace

void MetricsWriter::write(const Json& event) {
  // Only declared events, whole: a writer that drifted from the declaration fails here, in its tests.
  metrics_events::check_event(event, dir_ + "/metrics.jsonl");
  append_checked(jsonl_, dir_ + "/metrics.jsonl", event.dump() + "\n", &jsonl_failed_);
  if (event.at("event").as_string() != "epoch") return;
  if (csv_columns_.empty()) {
    for (const auto& kv : event.items()) {
      if (kv.second.is_array() || kv.second.is_object()) continue;
      csv_columns_.push_back(kv.first);
    }
    std::string header;
    for (size_t i = 0; i < csv_columns_.size(); ++i) header += (i ? "," : "") + csv_columns_[i];
    append_checked(csv_, dir_ + "/metrics.csv", header + "\n", &csv_failed_);
  }
  std::string row;
  for (size_t i = 0; i < csv_columns_.size(); ++i) {
    row += (i ? "," : "") + (event.has(csv_columns_[i]) ? csv_cell(event.at(csv_columns_[i])) : std::string());
  }
  append_checked(csv_, dir_ + "/metrics.csv", row + "\n", &csv_failed_);
}

void MetricsWriter::write_file(const std::string& name, const std::string& text) const {
  binary::write_file_atomically(dir_ + "/" + name, text, "run file");
}

}  // namespace pshard
