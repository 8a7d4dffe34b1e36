// The embedding rows one batch reads: per table its distinct ids, the rows pulled for them, and the gradients pushed.
#pragma once

#include <cstdint>
#include <vector>

#include "common/keys/table_layout.h"

namespace pshard {
class Config;
}
namespace pshard::models {
class Embedding;
}

namespace pshard::trainer {

// How a job's config makes a model's tables (run.seed, embedding.*), read in one place for pshard train and the
// servers' workers.
struct TableSettings {
  uint64_t seed = 0;         // run.seed: each row starts as a function of it, the table and the row
  bool bf16 = false;         // embedding.storage = bf16
  uint64_t hashed_rows = 0;  // embedding.hashed_rows: > 0, tables keyed by the ids themselves, at most this many rows
  uint32_t admit_after = 0;  // embedding.admit_after (hashed tables)
  int64_t expire_after = 0;  // embedding.expire_after (hashed tables)
  // Throws pshard::Error naming the key when admission or expiry is set for tables that are not hashed.
  static TableSettings from_config(const Config& cfg);
};

// The rows of each of the model's tables (ModelSpec::table_rows) for click data whose field f has `field_rows[f]`
// ids (0: any 64-bit id, unbucketed Criteo values): those, or embedding.hashed_rows for hashed tables. Throws
// pshard::Error when a field's ids are unbounded and the tables are not hashed.
std::vector<uint64_t> model_table_rows(const std::vector<uint64_t>& field_rows, const TableSettings& settings);

// The tables a model's Embedding layer reads, as the servers (or pshard train) make them: rows uniform on
// [-init_scale, init_scale], stored and keyed as `settings` say. Table f is field f's.
std::vector<TableSpec> table_specs(const models::Embedding& layer, const TableSettings& settings);

// A batch of click data has one id per sample and field; field f's id is a row of table f (models::Embedding).
// A step pulls each table's distinct ids once, hands the Embedding layer each sample's rows, and pushes one gradient
// per distinct row: the sum of the gradients of the samples that read it (the layer's are of the mean loss, so this
// is the row's gradient of the mean loss, as a dense parameter's is).
//
//   BatchRows rows(fields, dim);
//   rows.prepare(batch.ids.data(), batch.n);            // distinct ids, ascending, per table
//   ... pull rows.ids(f) into rows.values(f) ...
//   rows.gather(layer.rows(batch.n));                   // each sample's rows, field after field
//   ... forward, backward ...
//   rows.scatter(layer.row_grads());                    // rows.grads(f): one gradient per distinct id
class BatchRows {
 public:
  BatchRows(int64_t fields, int64_t dim);

  // ids: n x fields, row-major (data::Batch::ids).
  void prepare(const uint64_t* ids, int64_t n);
  int64_t fields() const { return static_cast<int64_t>(tables_.size()); }
  int64_t dim() const { return dim_; }
  int64_t samples() const { return n_; }
  // Table f's distinct ids of the batch, ascending.
  const std::vector<uint64_t>& ids(int64_t f) const { return table(f).ids; }
  // Table f's rows, ids(f).size() x dim, in the order of ids(f): where a pull writes them.
  float* values(int64_t f) { return table(f).values.data(); }
  // Writes each sample's rows to out (n x fields x dim: sample after sample, field after field).
  void gather(float* out) const;
  // Sums per-sample row gradients (n x fields x dim, the order of gather) into one gradient per distinct id.
  void scatter(const float* grads);
  // Table f's gradients, ids(f).size() x dim (after scatter; zeros after prepare).
  const float* grads(int64_t f) const { return table(f).grads.data(); }

 private:
  struct Table {
    std::vector<uint64_t> ids;
    std::vector<uint32_t> place;  // per sample: its id's index in ids
    std::vector<float> values, grads;
  };
  Table& table(int64_t f) { return tables_[static_cast<size_t>(f)]; }
  const Table& table(int64_t f) const { return tables_[static_cast<size_t>(f)]; }

  int64_t dim_;
  int64_t n_ = 0;
  std::vector<Table> tables_;
  std::vector<std::pair<uint64_t, uint32_t>> sort_;  // (id, sample) scratch
};

}  // namespace pshard::trainer
