// LARS: momentum SGD with a layer-wise trust ratio (You, Gitman, Ginsburg 2017).
#include <cmath>
#include <memory>

#include "optim/rules.h"

namespace pshard::optim::detail {
namespace {

// ratio = eta*||w|| / (||g|| + wd*||w||)  (L2 mode; 1 when ||w|| or ||g|| is 0), d = g + wd*w,
// v = m*v + ratio*d, w -= lr*v.  Decoupled mode: ratio = eta*||w||/||g||, d = g, and w -= lr*wd*w.
// Norms are over the n elements of one call. State: v.
class Lars final : public Optimizer {
 public:
  explicit Lars(const OptimizerParams& p)
      : m_(p.momentum), eta_(p.trust_coefficient), wd_(p.weight_decay), decoupled_(p.decoupled_weight_decay) {}
  const char* name() const override { return "lars"; }
  bool layer_wise() const override { return true; }
  size_t state_floats() const override { return 1; }

  void apply(float* __restrict w, const float* __restrict g, float* __restrict state, size_t n, float lr,
             int64_t t) const override {
    check_step("lars", t);
    // Pass 1: ||w||^2 and ||g||^2 in double, in independent lanes so the loop vectorises without reassociation.
    constexpr size_t kLanes = 8;
    double ww[kLanes] = {}, gg[kLanes] = {};
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      for (size_t j = 0; j < kLanes; ++j) {
        const double wi = w[i + j], gi = g[i + j];
        ww[j] += wi * wi;
        gg[j] += gi * gi;
      }
    }
    for (; i < n; ++i) {
      ww[0] += static_cast<double>(w[i]) * w[i];
      gg[0] += static_cast<double>(g[i]) * g[i];
    }
    double wsum = 0.0, gsum = 0.0;
    for (size_t j = 0; j < kLanes; ++j) wsum += ww[j], gsum += gg[j];
    const double w_norm = std::sqrt(wsum), g_norm = std::sqrt(gsum);

    const WeightDecay d = weight_decay(wd_, decoupled_, lr);
    double ratio = 1.0;
    if (w_norm > 0.0 && g_norm > 0.0) ratio = eta_ * w_norm / (g_norm + d.l2 * w_norm);
    const float r = static_cast<float>(ratio);

    // Pass 2: the momentum step on the trust-scaled direction.
    float* __restrict v = state;
    const float m = m_;
    for (size_t k = 0; k < n; ++k) {
      const float gi = g[k] + d.l2 * w[k];
      const float vi = m * v[k] + r * gi;
      v[k] = vi;
      w[k] = d.keep * w[k] - lr * vi;
    }
  }

 private:
  float m_;
  float eta_;
  float wd_;
  bool decoupled_;
};

}  // namespace

std::unique_ptr<Optimizer> make_lars(const OptimizerParams& p) { return std::make_unique<Lars>(p); }

}  // namespace pshard::optim::detail
