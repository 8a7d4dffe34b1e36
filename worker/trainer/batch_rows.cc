// BatchRows: distinct ids by sorting (id, sample) pairs; gathers and scatters by each sample's place.
#include "worker/trainer/batch_rows.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "common/error.h"
#include "models/layers/embedding.h"
#include "worker/trainer/parameter_sync.h"

namespace pshard::trainer {

std::vector<TableSpec> table_specs(const models::Embedding& layer, bool bf16) {
  std::vector<TableSpec> specs;
  for (const models::TableDecl& t : layer.tables()) {
    TableSpec spec;
    spec.name = t.name;
    spec.rows = t.rows;
    spec.dim = static_cast<uint32_t>(t.dim);
    spec.init = TableInit::kUniform;
    spec.init_scale = t.init_scale;
    spec.bf16 = bf16;
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
