// Internal to pshard_optimizers: the constructor of each rule and the checks they share.
#pragma once

#include <memory>
#include <string>

#include "optim/optimizer.h"

namespace pshard::optim::detail {

// One per rule file (sgd.cc, adagrad.cc, ...). Parameters are already validated by make_optimizer.
std::unique_ptr<Optimizer> make_sgd(const OptimizerParams& p);       // sgd.cc
std::unique_ptr<Optimizer> make_momentum(const OptimizerParams& p);  // sgd.cc (momentum and nesterov)
std::unique_ptr<Optimizer> make_nesterov(const OptimizerParams& p);  // sgd.cc
std::unique_ptr<Optimizer> make_adagrad(const OptimizerParams& p);   // adagrad.cc
std::unique_ptr<Optimizer> make_adadelta(const OptimizerParams& p);  // adadelta.cc
std::unique_ptr<Optimizer> make_rmsprop(const OptimizerParams& p);   // rmsprop.cc
std::unique_ptr<Optimizer> make_adam(const OptimizerParams& p);      // adam.cc
std::unique_ptr<Optimizer> make_adamw(const OptimizerParams& p);     // adam.cc
std::unique_ptr<Optimizer> make_lars(const OptimizerParams& p);      // lars.cc
std::unique_ptr<Optimizer> make_lamb(const OptimizerParams& p);      // lamb.cc
std::unique_ptr<Optimizer> make_ftrl(const OptimizerParams& p);      // ftrl.cc

// Throws pshard::Error when t < 1 (bias correction and "first step" logic need a 1-based count).
void check_step(const char* optimizer, int64_t t);

// Weight decay folded into one loop without branches:
//   g' = g + l2 * w           (l2 = wd in L2 mode, 0 in decoupled mode)
//   w' = keep * w - lr * step (keep = 1 - lr*wd in decoupled mode, 1 in L2 mode)
struct WeightDecay {
  float l2;
  float keep;
};
inline WeightDecay weight_decay(float wd, bool decoupled, float lr) {
  return decoupled ? WeightDecay{0.0f, 1.0f - lr * wd} : WeightDecay{wd, 1.0f};
}

}  // namespace pshard::optim::detail
