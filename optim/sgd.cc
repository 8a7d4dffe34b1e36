// SGD, momentum and Nesterov momentum (torch.optim.SGD with dampening 0).
#include <memory>

#include "optim/rules.h"

namespace pshard::optim::detail {
namespace {

// w -= lr * g
class Sgd final : public Optimizer {
 public:
  explicit Sgd(const OptimizerParams& p) : wd_(p.weight_decay), decoupled_(p.decoupled_weight_decay) {}
  const char* name() const override { return "sgd"; }
  size_t state_floats() const override { return 0; }

  void apply(float* __restrict w, const float* __restrict g, float* /*state*/, size_t n, float lr,
             int64_t t) const override {
    check_step("sgd", t);
    const WeightDecay d = weight_decay(wd_, decoupled_, lr);
    for (size_t i = 0; i < n; ++i) {
      const float gi = g[i] + d.l2 * w[i];
      w[i] = d.keep * w[i] - lr * gi;
    }
  }

 private:
  float wd_;
  bool decoupled_;
};

// v = m*v + g; then w -= lr*v (momentum) or w -= lr*(g + m*v) (Nesterov, PyTorch form). State: v.
class Momentum final : public Optimizer {
 public:
  Momentum(const OptimizerParams& p, bool nesterov)
      : m_(p.momentum), wd_(p.weight_decay), decoupled_(p.decoupled_weight_decay), nesterov_(nesterov) {}
  const char* name() const override { return nesterov_ ? "nesterov" : "momentum"; }
  size_t state_floats() const override { return 1; }

  void apply(float* __restrict w, const float* __restrict g, float* __restrict state, size_t n, float lr,
             int64_t t) const override {
    check_step(name(), t);
    const WeightDecay d = weight_decay(wd_, decoupled_, lr);
    float* __restrict v = state;
    const float m = m_;
    if (nesterov_) {
      for (size_t i = 0; i < n; ++i) {
        const float gi = g[i] + d.l2 * w[i];
        const float vi = m * v[i] + gi;
        v[i] = vi;
        w[i] = d.keep * w[i] - lr * (gi + m * vi);
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        const float gi = g[i] + d.l2 * w[i];
        const float vi = m * v[i] + gi;
        v[i] = vi;
        w[i] = d.keep * w[i] - lr * vi;
      }
    }
  }

 private:
  float m_;
  float wd_;
  bool decoupled_;
  bool nesterov_;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(const OptimizerParams& p) { return std::make_unique<Sgd>(p); }
std::unique_ptr<Optimizer> make_momentum(const OptimizerParams& p) { return std::make_unique<Momentum>(p, false); }
std::unique_ptr<Optimizer> make_nesterov(const OptimizerParams& p) { return std::make_unique<Momentum>(p, true); }

}  // namespace pshard::optim::detail
