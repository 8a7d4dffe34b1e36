// CPU reference batch normalisation (per channel over batch and space), statistics accumulated in double.
#include <cmath>

#include "models/cpu/kernels.h"

namespace pshard::models::cpu {

void batchnorm_forward_train(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma, const float* beta,
                             float eps, float momentum, float* running_mean, float* running_var, float* save_mean,
                             float* save_invstd, float* y) {
  const int64_t m = n * hw;
#pragma omp parallel for if (n * c * hw > (1 << 14))
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0.0;
    for (int64_t b = 0; b < n; ++b) {
      const float* p = x + (b * c + ch) * hw;
      for (int64_t i = 0; i < hw; ++i) sum += p[i];
    }
    const double mean = m > 0 ? sum / static_cast<double>(m) : 0.0;
    double sq = 0.0;
    for (int64_t b = 0; b < n; ++b) {
      const float* p = x + (b * c + ch) * hw;
      for (int64_t i = 0; i < hw; ++i) {
        const double d = p[i] - mean;
        sq += d * d;
      }
    }
    const double var = m > 0 ? sq / static_cast<double>(m) : 0.0;
    const float invstd = static_cast<float>(1.0 / std::sqrt(var + eps));
    save_mean[ch] = static_cast<float>(mean);
    save_invstd[ch] = invstd;
    const double unbiased = m > 1 ? var * static_cast<double>(m) / static_cast<double>(m - 1) : var;
    running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * mean);
    running_var[ch] = static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * unbiased);
    const float scale = gamma[ch] * invstd, shift = beta[ch] - static_cast<float>(mean) * scale;
    for (int64_t b = 0; b < n; ++b) {
      const float* p = x + (b * c + ch) * hw;
      float* q = y + (b * c + ch) * hw;
      for (int64_t i = 0; i < hw; ++i) q[i] = p[i] * scale + shift;
    }
  }
}

void batchnorm_forward_eval(int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma, const float* beta,
                            float eps, const float* running_mean, const float* running_var, float* y) {
#pragma omp parallel for if (n * c * hw > (1 << 14))
  for (int64_t ch = 0; ch < c; ++ch) {
    const float scale = gamma[ch] / std::sqrt(running_var[ch] + eps);
    const float shift = beta[ch] - running_mean[ch] * scale;
    for (int64_t b = 0; b < n; ++b) {
      const float* p = x + (b * c + ch) * hw;
      float* q = y + (b * c + ch) * hw;
      for (int64_t i = 0; i < hw; ++i) q[i] = p[i] * scale + shift;
    }
  }
}

void batchnorm_backward(int64_t n, int64_t c, int64_t hw, const float* x, const float* dy, const float* gamma,
                        const float* save_mean, const float* save_invstd, float* dx, float* dgamma, float* dbeta) {
  const int64_t m = n * hw;
#pragma omp parallel for if (n * c * hw > (1 << 14))
  for (int64_t ch = 0; ch < c; ++ch) {
    const float mean = save_mean[ch], invstd = save_invstd[ch];
    double sdy = 0.0, sdy_xhat = 0.0;
    for (int64_t b = 0; b < n; ++b) {
      const float* p = x + (b * c + ch) * hw;
      const float* g = dy + (b * c + ch) * hw;
      for (int64_t i = 0; i < hw; ++i) {
        sdy += g[i];
        sdy_xhat += static_cast<double>(g[i]) * ((p[i] - mean) * invstd);
      }
    }
    dbeta[ch] = static_cast<float>(sdy);
    dgamma[ch] = static_cast<float>(sdy_xhat);
    // dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat))
    const float k = gamma[ch] * invstd;
    const float mdy = static_cast<float>(sdy / static_cast<double>(m));
    const float mdx = static_cast<float>(sdy_xhat / static_cast<double>(m));
    for (int64_t b = 0; b < n; ++b) {
      const float* p = x + (b * c + ch) * hw;
      const float* g = dy + (b * c + ch) * hw;
      float* q = dx + (b * c + ch) * hw;
      for (int64_t i = 0; i < hw; ++i) q[i] = k * (g[i] - mdy - (p[i] - mean) * invstd * mdx);
    }
  }
}

}  // namespace pshard::models::cpu
