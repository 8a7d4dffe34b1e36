// LAMB: Adam direction with a layer-wise trust ratio (You et al. 2019, with Adam's bias correction).
#include <cmath>
#include <memory>

#include "optim/rules.h"

namespace pshard::optim::detail {
namespace {

// m, v as Adam; r = (m / (1-b1^t)) / (sqrt(v) / sqrt(1-b2^t) + eps);
// decoupled mode: u = r + wd*w; L2 mode: g += wd*w before the moments and u = r;
// w -= lr * (||w|| / ||u||) * u, ratio 1 when ||w|| or ||u|| is 0. Norms over the n elements of one call.
// State: m, v. u is computed twice (norm pass, update pass) instead of being stored: no allocation.
class Lamb final : public Optimizer {
 public:
  explicit Lamb(const OptimizerParams& p)
      : b1_(p.beta1), b2_(p.beta2), eps_(p.eps), wd_(p.weight_decay), decoupled_(p.decoupled_weight_decay) {}
  const char* name() const override { return "lamb"; }
  bool layer_wise() const override { return true; }
  size_t state_floats() const override { return 2; }

  void apply(float* __restrict w, const float* __restrict g, float* __restrict state, size_t n, float lr,
             int64_t t) const override {
    check_step("lamb", t);
    float* __restrict m = state;
    float* __restrict v = state + n;
    const double td = static_cast<double>(t);
    const float inv_bc1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(b1_), td)));
    const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(b2_), td)));
    const float b1 = b1_, b2 = b2_, one_minus_b1 = 1.0f - b1_, one_minus_b2 = 1.0f - b2_, eps = eps_;
    const float l2 = decoupled_ ? 0.0f : wd_;   // added to the gradient
    const float dwd = decoupled_ ? wd_ : 0.0f;  // added to the update

    // Pass 1: moments, and ||w||^2, ||u||^2 in double lanes (vectorisable without reassociation).
    constexpr size_t kLanes = 8;
    double ww[kLanes] = {}, uu[kLanes] = {};
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      for (size_t j = 0; j < kLanes; ++j) {
        const size_t k = i + j;
        const float gi = g[k] + l2 * w[k];
        const float mi = b1 * m[k] + one_minus_b1 * gi;
        const float vi = b2 * v[k] + one_minus_b2 * gi * gi;
        m[k] = mi;
        v[k] = vi;
        const float ui = mi * inv_bc1 / (std::sqrt(vi) * inv_sqrt_bc2 + eps) + dwd * w[k];
        ww[j] += static_cast<double>(w[k]) * w[k];
        uu[j] += static_cast<double>(ui) * ui;
      }
    }
    for (; i < n; ++i) {
      const float gi = g[i] + l2 * w[i];
      const float mi = b1 * m[i] + one_minus_b1 * gi;
      const float vi = b2 * v[i] + one_minus_b2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      const float ui = mi * inv_bc1 / (std::sqrt(vi) * inv_sqrt_bc2 + eps) + dwd * w[i];
      ww[0] += static_cast<double>(w[i]) * w[i];
      uu[0] += static_cast<double>(ui) * ui;
    }
    double wsum = 0.0, usum = 0.0;
    for (size_t j = 0; j < kLanes; ++j) wsum += ww[j], usum += uu[j];
    const double w_norm = std::sqrt(wsum), u_norm = std::sqrt(usum);
    const double ratio = (w_norm > 0.0 && u_norm > 0.0) ? w_norm / u_norm : 1.0;
    const float step = static_cast<float>(lr * ratio);

    // Pass 2: recompute u from the updated moments (the same expression as pass 1) and step.
    for (size_t k = 0; k < n; ++k) {
      const float ui = m[k] * inv_bc1 / (std::sqrt(v[k]) * inv_sqrt_bc2 + eps) + dwd * w[k];
      w[k] -= step * ui;
    }
  }

 private:
  float b1_;
  float b2_;
  float eps_;
  float wd_;
  bool decoupled_;
};

}  // namespace

std::unique_ptr<Optimizer> make_lamb(const OptimizerParams& p) { return std::make_unique<Lamb>(p); }

}  // namespace pshard::optim::detail
