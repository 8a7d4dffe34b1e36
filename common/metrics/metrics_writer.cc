// Run-directory metrics: JSON lines plus a CSV of the epoch events.
#include "common/metrics/metrics_writer.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/util/binary_file.h"

namespace pshard {

void make_directories(const std::string& path) {
  if (path.empty()) return;
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      throw Error("cannot create directory " + partial + ": " + std::strerror(errno));
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
std::string csv_cell(const Json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.as_string();
  if (v.is_number()) return v.dump();
  if (v.type() == Json::Type::kBool) return v.as_bool() ? "true" : "false";
  return "";  // nested values (per-worker lists) stay in the JSON lines only
}
}  // namespace

void MetricsWriter::write(const Json& event) {
  std::string line = event.dump() + "\n";
  std::fputs(line.c_str(), jsonl_);
  std::fflush(jsonl_);
  if (!event.has("event") || !event.at("event").is_string() || event.at("event").as_string() != "epoch") return;
  if (csv_columns_.empty()) {
    for (const auto& kv : event.items()) {
      if (kv.second.is_array() || kv.second.is_object()) continue;
      csv_columns_.push_back(kv.first);
    }
    std::string header;
    for (size_t i = 0; i < csv_columns_.size(); ++i) header += (i ? "," : "") + csv_columns_[i];
    std::fprintf(csv_, "%s\n", header.c_str());
  }
  std::string row;
  for (size_t i = 0; i < csv_columns_.size(); ++i) {
    row += (i ? "," : "") + (event.has(csv_columns_[i]) ? csv_cell(event.at(csv_columns_[i])) : std::string());
  }
  std::fprintf(csv_, "%s\n", row.c_str());
  std::fflush(csv_);
}

void MetricsWriter::write_file(const std::string& name, const std::string& text) const {
  binary::write_file_atomically(dir_ + "/" + name, text, "run file");
}

}  // namespace pshard
