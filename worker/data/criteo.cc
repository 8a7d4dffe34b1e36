// Criteo display-ads text files: strict parsing of label, 13 integers and 26 hex hashes per line.
#include "worker/data/criteo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <memory>
#include <string>
#include <string_view>

#include "common/error.h"

namespace pshard::data {

namespace {

constexpr int64_t kColumns = 1 + kCriteoDense + kCriteoFields;

// The Kaggle challenge's column names: label, I1..I13, C1..C26 (column is 0-based).
std::string column_name(int64_t column) {
  if (column == 0) return "label";
  if (column <= kCriteoDense) return "I" + std::to_string(column);
  return "C" + std::to_string(column - kCriteoDense);
}

struct LineContext {
  const std::string& path;
  int64_t line;
};

[[noreturn]] void fail_field(const LineContext& at, int64_t column, std::string_view value, const std::string& what) {
  std::string shown(value.substr(0, 40));
  throw Error("criteo " + at.path + " line " + std::to_string(at.line) + ", field " + std::to_string(column + 1) +
              " (" + column_name(column) + "): \"" + shown + (value.size() > 40 ? "...\"" : "\"") + " " + what);
}

float parse_label(const LineContext& at, std::string_view v) {
  if (v == "0") return 0.0f;
  if (v == "1") return 1.0f;
  fail_field(at, 0, v, "is not a label (0 or 1)");
}

float parse_dense(const LineContext& at, int64_t column, std::string_view v) {
  if (v.empty()) return 0.0f;  // missing
  int64_t x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec == std::errc::result_out_of_range) fail_field(at, column, v, "is out of the int64 range");
  if (ec != std::errc() || end != v.data() + v.size()) fail_field(at, column, v, "is not an integer");
  return static_cast<float>(std::log1p(static_cast<double>(std::max<int64_t>(x, 0))));
}

uint64_t parse_category(const LineContext& at, int64_t column, std::string_view v, uint64_t buckets) {
  if (v.empty()) return buckets > 0 ? buckets : kCriteoMissingId;
  uint64_t h = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), h, 16);
  if (v.size() != 8 || ec != std::errc() || end != v.data() + v.size()) {
    fail_field(at, column, v, "is not a category (8 hex digits)");
  }
  return buckets > 0 ? h % buckets : h;
}

struct FileCloser {
  void operator()(FILE* f) const { fclose(f); }
};

// getline()'s buffer, which it grows with realloc.
struct LineBuffer {
  char* data = nullptr;
  size_t capacity = 0;
  LineBuffer() = default;
  LineBuffer(const LineBuffer&) = delete;
  LineBuffer& operator=(const LineBuffer&) = delete;
  ~LineBuffer() { free(data); }
};

}  // namespace

CtrDataset load_criteo(const std::string& path, const CriteoOptions& options) {
  if (options.max_samples < 0) {
    throw Error("criteo " + path + ": max_samples must be >= 0, got " + std::to_string(options.max_samples));
  }
  std::unique_ptr<FILE, FileCloser> file(fopen(path.c_str(), "rb"));
  if (!file) throw Error("criteo " + path + ": cannot open: " + strerror(errno));

  CtrDataset d;
  d.name = "criteo";
  d.num_dense = kCriteoDense;
  d.num_fields = kCriteoFields;
  d.cardinality.assign(kCriteoFields, options.buckets > 0 ? options.buckets + 1 : 0);

  LineBuffer buf;
  int64_t line = 0;
  float dense[kCriteoDense];
  uint64_t ids[kCriteoFields];
  for (;;) {
    if (options.max_samples > 0 && line == options.max_samples) break;
    errno = 0;
    ssize_t len = getline(&buf.data, &buf.capacity, file.get());
    if (len < 0) {
      if (ferror(file.get()))
        throw Error("criteo " + path + ": read error after line " + std::to_string(line) + ": " + strerror(errno));
      break;
    }
    ++line;
    std::string_view text(buf.data, static_cast<size_t>(len));
    if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
    LineContext at{path, line};

    int64_t fields = 1 + static_cast<int64_t>(std::count(text.begin(), text.end(), '\t'));
    if (fields != kColumns) {
      throw Error("criteo " + path + " line " + std::to_string(line) + ": " + std::to_string(fields) +
                  " fields, expected " + std::to_string(kColumns) + " (label, I1-I13, C1-C26; tab-separated)");
    }
    float label = 0;
    size_t begin = 0;
    for (int64_t column = 0; column < kColumns; ++column) {
      size_t tab = text.find('\t', begin);
      std::string_view v = text.substr(begin, tab == std::string_view::npos ? std::string_view::npos : tab - begin);
      begin = tab + 1;
      if (column == 0) {
        label = parse_label(at, v);
      } else if (column <= kCriteoDense) {
        dense[column - 1] = parse_dense(at, column, v);
      } else {
        ids[column - 1 - kCriteoDense] = parse_category(at, column, v, options.buckets);
      }
    }
    d.labels.push_back(label);
    d.dense.insert(d.dense.end(), dense, dense + kCriteoDense);
    d.ids.insert(d.ids.end(), ids, ids + kCriteoFields);
  }
  if (line == 0) throw Error("criteo " + path + ": empty file (no samples)");
  return d;
}

DataSplits load_criteo_splits(const Config& cfg) {
  const std::string train_path = cfg.get_string("data.train_path"), test_path = cfg.get_string("data.test_path");
  if (train_path.empty() || test_path.empty()) {
    throw Error(cfg.origin() +
                ": data.name = criteo needs data.train_path and data.test_path (Criteo's tab-separated "
                "click logs)");
  }
  CriteoOptions o;
  o.buckets = static_cast<uint64_t>(cfg.get_int("data.cardinality"));
  DataSplits s;
  o.max_samples = cfg.get_int("data.train_size");
  s.train = ctr_as_dataset(load_criteo(train_path, o));
  o.max_samples = cfg.get_int("data.test_size");
  s.test = ctr_as_dataset(load_criteo(test_path, o));
  return s;
}

}  // namespace pshard::data
