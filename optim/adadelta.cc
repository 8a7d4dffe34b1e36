// Adadelta (torch.optim.Adadelta: lr multiplies the delta).
#include <cmath>
#include <memory>

#include "optim/rules.h"

namespace pshard::optim::detail {
namespace {

// a = rho*a + (1-rho)*g^2; delta = sqrt(u + eps) / sqrt(a + eps) * g; u = rho*u + (1-rho)*delta^2; w -= lr*delta.
// State: a (square average), u (accumulated delta).
class Adadelta final : public Optimizer {
 public:
  explicit Adadelta(const OptimizerParams& p)
      : rho_(p.rho), eps_(p.eps), wd_(p.weight_decay), decoupled_(p.decoupled_weight_decay) {}
  const char* name() const override { return "adadelta"; }
  size_t state_floats() const override { return 2; }

  void apply(float* __restrict w, const float* __restrict g, float* __restrict state, size_t n, float lr,
             int64_t t) const override {
    check_step("adadelta", t);
    const WeightDecay d = weight_decay(wd_, decoupled_, lr);
    float* __restrict a = state;
    float* __restrict u = state + n;
    const float rho = rho_, one_minus_rho = 1.0f - rho_, eps = eps_;
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] + d.l2 * w[i];
      const float ai = rho * a[i] + one_minus_rho * gi * gi;
      const float delta = std::sqrt(u[i] + eps) / std::sqrt(ai + eps) * gi;
      a[i] = ai;
      u[i] = rho * u[i] + one_minus_rho * delta * delta;
      w[i] = d.keep * w[i] - lr * delta;
    }
  }

 private:
  float rho_;
  float eps_;
  float wd_;
  bool decoupled_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adadelta(const OptimizerParams& p) { return std::make_unique<Adadelta>(p); }

}  // namespace pshard::optim::detail
