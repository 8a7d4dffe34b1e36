// Embedding layer: copies between the batch's tensors and the host buffers the trainer fills and reads.
#include "models/layers/embedding.h"

#include <cstring>

#include "common/error.h"

namespace pshard::models {
namespace {

// The common dim of the tables; an Error naming a table that does not fit.
int64_t checked_dim(const std::vector<TableDecl>& tables) {
  if (tables.empty()) throw Error("Embedding: needs at least one table (one per categorical field)");
  const int64_t dim = tables.front().dim;
  for (const TableDecl& t : tables) {
    if (t.rows == 0) throw Error("Embedding: table " + t.name + " has no rows");
    if (t.dim <= 0) throw Error("Embedding: table " + t.name + " has dim " + std::to_string(t.dim) + ", must be > 0");
    if (t.dim != dim) {
      throw Error("Embedding: table " + t.name + " has dim " + std::to_string(t.dim) + " but table " +
                  tables.front().name + " has " + std::to_string(dim) + "; every table needs the same dim");
    }
  }
  return dim;
}

}  // namespace

Embedding::Embedding(Backend& backend, int64_t in_features, std::vector<TableDecl> tables)
    : Layer(backend, {in_features}, {in_features + static_cast<int64_t>(tables.size()) * checked_dim(tables)}),
      in_(in_features),
      dim_(tables.front().dim),
      tables_(std::move(tables)) {
  if (in_features <= 0) throw Error("Embedding: in_features must be > 0, got " + std::to_string(in_features));
  if (!backend.host_accessible()) {
    throw Error(
        "Embedding: its rows are written and read in host memory, so it runs on the CPU only; use "
        "train.device = cpu");
  }
}

float* Embedding::rows(int64_t n) {
  if (n <= 0) throw Error("Embedding: rows for " + std::to_string(n) + " samples");
  const size_t need = static_cast<size_t>(n * fields() * dim_);
  if (rows_.size() < need) rows_.resize(need, 0.0f);
  return rows_.data();
}

void Embedding::forward(const Tensor& x, const Tensor& y, bool) {
  const int64_t n = x.dim(0), row_part = fields() * dim_, out = in_ + row_part;
  // Catches a forward whose rows were never written (the buffer only grows, so a smaller batch always fits).
  if (static_cast<int64_t>(rows_.size()) < n * row_part) {
    throw Error("Embedding: forward over " + std::to_string(n) + " samples, but rows() holds " +
                std::to_string(rows_.size() / static_cast<size_t>(row_part)) +
                " (write the batch's rows into rows(n) before the forward)");
  }
  for (int64_t s = 0; s < n; ++s) {
    float* ys = y.data() + s * out;
    std::memcpy(ys, x.data() + s * in_, sizeof(float) * static_cast<size_t>(in_));
    std::memcpy(ys + in_, rows_.data() + s * row_part, sizeof(float) * static_cast<size_t>(row_part));
  }
}

void Embedding::backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor* dx) {
  const int64_t n = x.dim(0), row_part = fields() * dim_, out = in_ + row_part;
  if (row_grads_.size() < static_cast<size_t>(n * row_part)) row_grads_.resize(static_cast<size_t>(n * row_part));
  for (int64_t s = 0; s < n; ++s) {
    const float* dys = dy.data() + s * out;
    if (dx) std::memcpy(dx->data() + s * in_, dys, sizeof(float) * static_cast<size_t>(in_));
    std::memcpy(row_grads_.data() + s * row_part, dys + in_, sizeof(float) * static_cast<size_t>(row_part));
  }
}

}  // namespace pshard::models
