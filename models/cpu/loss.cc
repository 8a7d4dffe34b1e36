// CPU reference losses: softmax cross-entropy and mean squared error.
#include <cmath>
#include <string>

#include "common/error.h"
#include "models/cpu/kernels.h"

namespace pshard::models::cpu {

void softmax_xent_forward(const float* logits, const int32_t* labels, int64_t n, int64_t classes, float* probs,
                          double* loss_sum, int64_t* correct) {
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      throw Error("softmax cross-entropy: label " + std::to_string(labels[i]) + " of sample " + std::to_string(i) +
                  " is outside [0, " + std::to_string(classes) + ")");
    }
  }
  double loss = 0.0;
  int64_t hits = 0;
#pragma omp parallel for reduction(+ : loss, hits) if (n * classes > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    const float* z = logits + i * classes;
    float* p = probs + i * classes;
    int64_t arg = 0;
    for (int64_t j = 1; j < classes; ++j) {
      if (z[j] > z[arg]) arg = j;
    }
    const float mx = z[arg];
    double sum = 0.0;
    for (int64_t j = 0; j < classes; ++j) {
      p[j] = std::exp(z[j] - mx);
      sum += p[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < classes; ++j) p[j] *= inv;
    loss += std::log(sum) - static_cast<double>(z[labels[i]] - mx);
    hits += arg == labels[i] ? 1 : 0;
  }
  *loss_sum = loss;
  *correct = hits;
}

void softmax_xent_backward(const float* probs, const int32_t* labels, int64_t n, int64_t classes, float* dlogits) {
  const float inv_n = n > 0 ? 1.0f / static_cast<float>(n) : 0.0f;
#pragma omp parallel for if (n * classes > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    const float* p = probs + i * classes;
    float* d = dlogits + i * classes;
    for (int64_t j = 0; j < classes; ++j) d[j] = p[j] * inv_n;
    d[labels[i]] -= inv_n;
  }
}

void mse_forward(const float* pred, const float* target, int64_t n, int64_t dim, double* loss_sum) {
  double loss = 0.0;
#pragma omp parallel for reduction(+ : loss) if (n * dim > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    double s = 0.0;
    for (int64_t j = 0; j < dim; ++j) {
      const double d = static_cast<double>(pred[i * dim + j]) - target[i * dim + j];
      s += d * d;
    }
    loss += s / static_cast<double>(dim);
  }
  *loss_sum = loss;
}

void mse_backward(const float* pred, const float* target, int64_t n, int64_t dim, float* dpred) {
  const float k = n * dim > 0 ? 2.0f / static_cast<float>(n * dim) : 0.0f;
#pragma omp parallel for if (n * dim > (1 << 14))
  for (int64_t i = 0; i < n * dim; ++i) dpred[i] = k * (pred[i] - target[i]);
}

}  // namespace pshard::models::cpu
