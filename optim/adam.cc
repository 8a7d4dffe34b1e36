// Adam and AdamW (torch.optim.Adam / torch.optim.AdamW, no amsgrad).
#include <cmath>
#include <memory>

#include "optim/rules.h"

namespace pshard::optim::detail {
namespace {

// m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
// w -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). State: m, v.
// AdamW is the same rule with decoupled weight decay (w -= lr*wd*w) whatever optimizer.weight_decay_mode says.
class Adam final : public Optimizer {
 public:
  Adam(const OptimizerParams& p, bool adamw)
      : b1_(p.beta1),
        b2_(p.beta2),
        eps_(p.eps),
        wd_(p.weight_decay),
        decoupled_(adamw || p.decoupled_weight_decay),
        adamw_(adamw) {}
  const char* name() const override { return adamw_ ? "adamw" : "adam"; }
  size_t state_floats() const override { return 2; }

  void apply(float* __restrict w, const float* __restrict g, float* __restrict state, size_t n, float lr,
             int64_t t) const override {
    check_step(name(), t);
    const WeightDecay d = weight_decay(wd_, decoupled_, lr);
    float* __restrict m = state;
    float* __restrict v = state + n;
    const double td = static_cast<double>(t);
    const float step_size = static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(b1_), td)));
    const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(b2_), td)));
    const float b1 = b1_, b2 = b2_, one_minus_b1 = 1.0f - b1_, one_minus_b2 = 1.0f - b2_, eps = eps_;
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] + d.l2 * w[i];
      const float mi = b1 * m[i] + one_minus_b1 * gi;
      const float vi = b2 * v[i] + one_minus_b2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      w[i] = d.keep * w[i] - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
    }
  }

 private:
  float b1_;
  float b2_;
  float eps_;
  float wd_;
  bool decoupled_;
  bool adamw_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adam(const OptimizerParams& p) { return std::make_unique<Adam>(p, false); }
std::unique_ptr<Optimizer> make_adamw(const OptimizerParams& p) { return std::make_unique<Adam>(p, true); }

}  // namespace pshard::optim::detail
