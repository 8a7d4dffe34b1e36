// Dot interaction: plain host loops over the pairs of each sample.
#include "models/layers/dot_interaction.h"

#include "common/error.h"

namespace pshard::models {

DotInteraction::DotInteraction(Backend& backend, int64_t vectors, int64_t dim)
    : Layer(backend, {vectors * dim}, {dim + vectors * (vectors - 1) / 2}), vectors_(vectors), dim_(dim) {
  if (vectors < 2 || dim < 1) {
    throw Error("DotInteraction: needs at least 2 vectors of at least 1 value, got " + std::to_string(vectors) +
                " of " + std::to_string(dim));
  }
  if (!backend.host_accessible()) {
    throw Error("DotInteraction: runs on host memory, so on the CPU only; use train.device = cpu");
  }
}

void DotInteraction::forward(const Tensor& x, const Tensor& y, bool) {
  const int64_t n = x.dim(0), in = vectors_ * dim_, out = output_shape()[0];
  for (int64_t s = 0; s < n; ++s) {
    const float* z = x.data() + s * in;
    float* ys = y.data() + s * out;
    for (int64_t k = 0; k < dim_; ++k) ys[k] = z[k];
    float* dot = ys + dim_;
    for (int64_t i = 0; i < vectors_; ++i) {
      for (int64_t j = i + 1; j < vectors_; ++j) {
        const float *a = z + i * dim_, *b = z + j * dim_;
        float sum = 0.0f;
        for (int64_t k = 0; k < dim_; ++k) sum += a[k] * b[k];
        *dot++ = sum;
      }
    }
  }
}

void DotInteraction::backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor* dx) {
  if (!dx) return;  // no parameters: only the input's gradient
  const int64_t n = x.dim(0), in = vectors_ * dim_, out = output_shape()[0];
  for (int64_t s = 0; s < n; ++s) {
    const float* z = x.data() + s * in;
    const float* dys = dy.data() + s * out;
    float* dz = dx->data() + s * in;
    for (int64_t k = 0; k < dim_; ++k) dz[k] = dys[k];  // z_0 is also passed through
    for (int64_t k = dim_; k < in; ++k) dz[k] = 0.0f;
    const float* ddot = dys + dim_;
    for (int64_t i = 0; i < vectors_; ++i) {
      for (int64_t j = i + 1; j < vectors_; ++j) {
        const float g = *ddot++;
        const float *a = z + i * dim_, *b = z + j * dim_;
        float *da = dz + i * dim_, *db = dz + j * dim_;
        for (int64_t k = 0; k < dim_; ++k) {
          da[k] += g * b[k];
          db[k] += g * a[k];
        }
      }
    }
  }
}

}  // namespace pshard::models
