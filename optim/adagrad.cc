// Adagrad (torch.optim.Adagrad with lr_decay 0 and initial accumulator 0).
#include <cmath>
#include <memory>

#include "optim/rules.h"

namespace pshard::optim::detail {
namespace {

// s += g^2; w -= lr * g / (sqrt(s) + eps). State: s.
class Adagrad final : public Optimizer {
 public:
  explicit Adagrad(const OptimizerParams& p) : eps_(p.eps), wd_(p.weight_decay), decoupled_(p.decoupled_weight_decay) {}
  const char* name() const override { return "adagrad"; }
  size_t state_floats() const override { return 1; }

  void apply(float* __restrict w, const float* __restrict g, float* __restrict state, size_t n, float lr,
             int64_t t) const override {
    check_step("adagrad", t);
    const WeightDecay d = weight_decay(wd_, decoupled_, lr);
    float* __restrict s = state;
    const float eps = eps_;
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] + d.l2 * w[i];
      const float si = s[i] + gi * gi;
      s[i] = si;
      w[i] = d.keep * w[i] - lr * gi / (std::sqrt(si) + eps);
    }
  }

 private:
  float eps_;
  float wd_;
  bool decoupled_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adagrad(const OptimizerParams& p) { return std::make_unique<Adagrad>(p); }

}  // namespace pshard::optim::detail
