// Embedding layer: appends each sample's embedding rows, one per categorical field, to its dense features.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/layer.h"

namespace pshard::models {

// One embedding table: one per categorical field. Its rows live on the parameter servers, which make them; the
// layer only declares the table.
struct TableDecl {
  std::string name;      // "embed.0"
  uint64_t rows = 0;     // distinct values of the field
  int64_t dim = 0;       // values per row
  float init_scale = 0;  // rows start uniform on [-init_scale, init_scale]
};

// Input [n, in_features], output [n, in_features + fields * dim]: y[s] = [x[s] | row of field 0 for sample s | row
// of field 1 | ...]. The rows are not parameters of the Model: before each forward the caller writes the batch's
// rows into rows(n), and after backward it reads their gradients from row_grads(). Host-accessible backends only.
//
//   Embedding embed(backend, 16, {{"embed.0", 1000, 16, 0.05f}, {"embed.1", 50, 16, 0.05f}});
//   float* r = embed.rows(n);              // n * fields * dim floats: sample after sample, field after field
//   /* write the rows the servers sent, then forward and backward */
//   const float* g = embed.row_grads();    // same layout: the rows' gradients to push
class Embedding final : public Layer {
 public:
  // Every table has rows > 0 and the same dim > 0, and there is at least one; an Error otherwise, and on a backend
  // whose memory the host cannot read.
  Embedding(Backend& backend, int64_t in_features, std::vector<TableDecl> tables);
  const char* type() const override { return "Embedding"; }
  bool trains_outside() const override { return true; }

  const std::vector<TableDecl>& tables() const { return tables_; }
  int64_t fields() const { return static_cast<int64_t>(tables_.size()); }
  int64_t dim() const { return dim_; }

  // The host buffer the next forward reads the rows of n samples from (n * fields * dim floats, owned by the layer;
  // grown as needed, never shrunk, so the pointer changes only when n exceeds every earlier n).
  float* rows(int64_t n);
  // After backward: d(loss that backward differentiates) / d(row value), n * fields * dim floats in the layout of
  // rows(). Model::backward differentiates the MEAN loss times Model::loss_scale().
  const float* row_grads() const { return row_grads_.data(); }

  void forward(const Tensor& x, const Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;

 private:
  int64_t in_, dim_;
  std::vector<TableDecl> tables_;
  std::vector<float> rows_, row_grads_;
};

}  // namespace pshard::models
