// FTRL-Proximal (McMahan et al. 2013, "Ad Click Prediction: a View from the Trenches"), per coordinate.
#include <cmath>
#include <memory>

#include "optim/rules.h"

namespace pshard::optim::detail {
namespace {

// n' = n + g^2; z += g - (sqrt(n') - sqrt(n)) / lr * w; n = n';
// w = 0 where |z| <= l1, else -(z - sign(z) l1) / ((beta + sqrt(n)) / lr + l2). State: z, n.
// The weights follow from (z, n) after every update: a row that starts at non-zero values (a table's init) keeps
// them only until its first update; FTRL models usually start at zero (init "zeros").
class Ftrl final : public Optimizer {
 public:
  explicit Ftrl(const OptimizerParams& p)
      : beta_(p.ftrl_beta), l1_(p.ftrl_l1), l2_(p.ftrl_l2), wd_(p.weight_decay), decoupled_(p.decoupled_weight_decay) {}
  const char* name() const override { return "ftrl"; }
  size_t state_floats() const override { return 2; }

  void apply(float* __restrict w, const float* __restrict g, float* __restrict state, size_t n, float lr,
             int64_t t) const override {
    check_step("ftrl", t);
    const WeightDecay d = weight_decay(wd_, decoupled_, lr);
    float* __restrict z = state;
    float* __restrict sq = state + n;
    for (size_t i = 0; i < n; ++i) {
      const float wi = d.keep * w[i];
      const float gi = g[i] + d.l2 * wi;
      const float s_old = std::sqrt(sq[i]);
      const float s_new_sq = sq[i] + gi * gi;
      const float s_new = std::sqrt(s_new_sq);
      z[i] += gi - (s_new - s_old) / lr * wi;
      sq[i] = s_new_sq;
      const float zi = z[i];
      w[i] = std::fabs(zi) <= l1_ ? 0.0f : -(zi - std::copysign(l1_, zi)) / ((beta_ + s_new) / lr + l2_);
    }
  }

 private:
  float beta_, l1_, l2_;
  float wd_;
  bool decoupled_;
};

}  // namespace

std::unique_ptr<Optimizer> make_ftrl(const OptimizerParams& p) { return std::make_unique<Ftrl>(p); }

}  // namespace pshard::optim::detail
