// RMSprop (torch.optim.RMSprop without momentum, not centered; alpha = optimizer.rho).
#include <cmath>
#include <memory>

#include "optim/rules.h"

namespace pshard::optim::detail {
namespace {

// a = rho*a + (1-rho)*g^2; w -= lr * g / (sqrt(a) + eps). State: a.
class Rmsprop final : public Optimizer {
 public:
  explicit Rmsprop(const OptimizerParams& p)
      : rho_(p.rho), eps_(p.eps), wd_(p.weight_decay), decoupled_(p.decoupled_weight_decay) {}
  const char* name() const override { return "rmsprop"; }
  size_t state_floats() const override { return 1; }

  void apply(float* __restrict w, const float* __restrict g, float* __restrict state, size_t n, float lr,
             int64_t t) const override {
    check_step("rmsprop", t);
    const WeightDecay d = weight_decay(wd_, decoupled_, lr);
    float* __restrict a = state;
    const float rho = rho_, one_minus_rho = 1.0f - rho_, eps = eps_;
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] + d.l2 * w[i];
      const float ai = rho * a[i] + one_minus_rho * gi * gi;
      a[i] = ai;
      w[i] = d.keep * w[i] - lr * gi / (std::sqrt(ai) + eps);
    }
  }

 private:
  float rho_;
  float eps_;
  float wd_;
  bool decoupled_;
};

}  // namespace

std::unique_ptr<Optimizer> make_rmsprop(const OptimizerParams& p) { return std::make_unique<Rmsprop>(p); }

}  // namespace pshard::optim::detail
