// BatchRows: distinct ids by sorting (id, sample) pairs; gathers and scatters by each sample's place.
#include "worker/trainer/batch_rows.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "common/config/config.h"
#include "common/error.h"
#include "models/layers/embedding.h"
#include "worker/trainer/parameter_sync.h"

namespace pshard::trainer {

TableSettings TableSettings::from_config(const Config& cfg) {
  TableSettings s;
  s.seed = static_cast<uint64_t>(cfg.get_int("run.seed"));
  s.bf16 = cfg.get_string("embedding.storage") == "bf16";
  s.hashed_rows = static_cast<uint64_t>(cfg.get_int("embedding.hashed_rows"));
  s.admit_after = static_cast<uint32_t>(cfg.get_int("embedding.admit_after"));
  s.expire_after = cfg.get_int("embedding.expire_after");
  if (s.hashed_rows == 0 && (s.admit_after > 0 || s.expire_after > 0)) {
    throw Error(cfg.origin() + ": embedding." + (s.admit_after > 0 ? "admit_after" : "expire_after") +
                " is for hashed tables: set embedding.hashed_rows too");
  }
  return s;
}

std::vector<uint64_t> model_table_rows(const std::vector<uint64_t>& field_rows, const TableSettings& settings) {
  if (settings.hashed_rows > 0) return std::vector<uint64_t>(field_rows.size(), settings.hashed_rows);
  for (size_t f = 0; f < field_rows.size(); ++f) {
    if (field_rows[f] == 0) {
      throw Error("categorical field " + std::to_string(f) +
                  " has unbounded ids (criteo with data.cardinality = 0: the values themselves): its table must be "
                  "hashed; set embedding.hashed_rows, or data.cardinality to hash the values into that many buckets");
    }
  }
  return field_rows;
}

std::vector<TableSpec> table_specs(const models::Embedding& layer, const TableSettings& settings) {
  std::vector<TableSpec> specs;
  for (const models::TableDecl& t : layer.tables()) {
    TableSpec spec;
    spec.name = t.name;
    spec.rows = t.rows;
    spec.dim = static_cast<uint32_t>(t.dim);
    spec.init = TableInit::kUniform;
    spec.init_scale = t.init_scale;
    spec.bf16 = settings.bf16;
    spec.hashed = settings.hashed_rows > 0;
    spec.admit_after = settings.admit_after;
    spec.expire_after = settings.expire_after;
    specs.push_back(spec);
  }
  check_table_specs(specs);
  return specs;
}

void ParameterSync::pull_rows(int64_t, BatchRows&) {
  throw Error("this training has no parameter store for embedding tables");
}
void ParameterSync::wait_rows() { throw Error("this training has no parameter store for embedding tables"); }
void ParameterSync::push_rows(int64_t, const BatchRows&) {
  throw Error("this training has no parameter store for embedding tables");
}

BatchRows::BatchRows(int64_t fields, int64_t dim) : dim_(dim), tables_(static_cast<size_t>(fields)) {
  if (fields < 1 || dim < 1) {
    throw Error("embedding rows: " + std::to_string(fields) + " tables of " + std::to_string(dim) +
                " values a row: need at least one table and one value");
  }
}

void BatchRows::prepare(const uint64_t* ids, int64_t n) {
  n_ = n;
  const int64_t fields = this->fields();
  const size_t row = static_cast<size_t>(dim_);
  for (int64_t f = 0; f < fields; ++f) {
    Table& t = table(f);
    sort_.resize(static_cast<size_t>(n));
    for (int64_t s = 0; s < n; ++s) sort_[static_cast<size_t>(s)] = {ids[s * fields + f], static_cast<uint32_t>(s)};
    std::sort(sort_.begin(), sort_.end());
    t.ids.clear();
    t.place.resize(static_cast<size_t>(n));
    for (const auto& [id, sample] : sort_) {
      if (t.ids.empty() || t.ids.back() != id) t.ids.push_back(id);
      t.place[sample] = static_cast<uint32_t>(t.ids.size() - 1);
    }
    t.values.resize(t.ids.size() * row);
    t.grads.assign(t.ids.size() * row, 0.0f);
  }
}

void BatchRows::gather(float* out) const {
  const int64_t fields = this->fields();
  const size_t bytes = sizeof(float) * static_cast<size_t>(dim_);
  for (int64_t s = 0; s < n_; ++s) {
    for (int64_t f = 0; f < fields; ++f) {
      const Table& t = table(f);
      std::memcpy(out + (s * fields + f) * dim_, t.values.data() + t.place[static_cast<size_t>(s)] * dim_, bytes);
    }
  }
}

void BatchRows::scatter(const float* grads) {
  const int64_t fields = this->fields();
  for (Table& t : tables_) std::fill(t.grads.begin(), t.grads.end(), 0.0f);
  for (int64_t s = 0; s < n_; ++s) {
    for (int64_t f = 0; f < fields; ++f) {
      Table& t = table(f);
      float* to = t.grads.data() + t.place[static_cast<size_t>(s)] * dim_;
      const float* from = grads + (s * fields + f) * dim_;
      for (int64_t k = 0; k < dim_; ++k) to[k] += from[k];
    }
  }
}

}  // namespace pshard::trainer
