// load_criteo(): Criteo's display-ads click logs (Kaggle's train.txt, the 1TB logs' day_N) as a CtrDataset.
//
// One sample per line, 40 tab-separated fields:
//
//   label \t I1 ... I13 \t C1 ... C26
//
//   label   0 or 1 (clicked)
//   I1-I13  integers (counts; negative values occur); an empty field is missing
//   C1-C26  categorical values, each hashed to 8 hex digits (either case); an empty field is missing
//
// Dense features (num_dense = 13): a missing value becomes 0, then x -> log(1 + max(x, 0)), the
// transform of DLRM's reference loader (negative counts clip to 0, the long tails shrink).
// Categorical ids (num_fields = 26): the 32-bit value of the hex hash. A missing value gets the
// id kCriteoMissingId = 2^32, which no 8-digit hash can take. With options.buckets = B > 0, a
// present hash h becomes h % B and a missing one B: ids lie in [0, B], cardinality B + 1 per field;
// with B = 0 the cardinality is 0 (hashed, unbounded). A trailing '\r' (CRLF files) is ignored.
//
//   CriteoOptions o;
//   o.buckets = 1000000;     // embedding rows per field (+1 for "missing")
//   o.max_samples = 100000;  // the file's first 100000 lines
//   CtrDataset d = load_criteo("/data/criteo/train.txt", o);
//
// Every bad line is an Error naming the file, the line (1-based) and the field:
//   criteo /data/criteo/train.txt line 17, field 5 (I4): "1.5" is not an integer
// as are a line with another number of fields, a label other than 0 or 1, a category that is not
// 8 hex digits, an integer out of int64's range, an unreadable file and a file with no lines.
#pragma once

#include <cstdint>
#include <string>

#include "worker/data/ctr_dataset.h"
#include "worker/data/dataset.h"

namespace pshard::data {

constexpr int64_t kCriteoDense = 13, kCriteoFields = 26;
constexpr uint64_t kCriteoMissingId = uint64_t{1} << 32;  // a missing category when buckets = 0

struct CriteoOptions {
  uint64_t buckets = 0;     // 0: ids are the hashes; B: hash % B, missing = B
  int64_t max_samples = 0;  // 0: every line; N: the first N lines only
};

CtrDataset load_criteo(const std::string& path, const CriteoOptions& options = CriteoOptions());

// data.name = criteo (load_data): data.train_path and data.test_path, each sample's hashes in data.cardinality buckets
// per field (one table of that many rows + 1 per field), the first data.train_size / data.test_size lines (0: all),
// as Datasets of two classes (ctr_dataset.h: ctr_as_dataset).
DataSplits load_criteo_splits(const Config& cfg);

}  // namespace pshard::data
