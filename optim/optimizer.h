// Optimizers: the update rules a server (or `pshard train`) applies to a slice of weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pshard {
class Config;
}

namespace pshard::optim {

// Hyper-parameters of an update rule, from the config keys optimizer.* (common/config/schema.cc).
// `lr` is the BASE learning rate (the schedule in lr_schedule.h turns it into a per-step lr);
// apply() only ever uses the lr it is given.
// The update rules' names, in the order of the factory's table (the config's optimizer.name choices:
// the pshard executable installs them, see common/config/schema.h).
std::vector<std::string> optimizer_names();

struct OptimizerParams {
  std::string name = "sgd";  // sgd|momentum|nesterov|adagrad|adadelta|rmsprop|adam|adamw|lars|lamb|ftrl
  float lr = 0.01f;
  float momentum = 0.9f;  // momentum, nesterov, lars
  float beta1 = 0.9f;     // adam, adamw, lamb
  float beta2 = 0.999f;   // adam, adamw, lamb
  float rho = 0.9f;       // adadelta, rmsprop (PyTorch's `rho` / `alpha`)
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  float trust_coefficient = 0.001f;     // lars eta
  float ftrl_beta = 1.0f;               // ftrl: the beta of its per-coordinate learning rate lr / (beta + sqrt(n))
  float ftrl_l1 = 0.0f;                 // ftrl: L1 strength (weights whose |z| <= l1 are exactly 0)
  float ftrl_l2 = 0.0f;                 // ftrl: L2 strength
  bool decoupled_weight_decay = false;  // optimizer.weight_decay_mode == "decoupled" (adamw: always)

  static OptimizerParams from_config(const Config& cfg);
  // The embedding tables' rule (embedding.optimizer; same: optimizer.name) with embedding.lr and embedding.eps and
  // optimizer.*'s other hyper-parameters.
  static OptimizerParams for_tables(const Config& cfg);
};

// One update rule. Stateless apart from its hyper-parameters: the caller owns the per-element state, so a server can
// checkpoint it and shard it by slice. apply() is const and thread-safe (servers call it concurrently on different
// slices) and never allocates.
//
//   auto opt = make_optimizer(OptimizerParams::from_config(cfg));
//   std::vector<float> state(n * opt->state_floats(), 0.0f);   // zero-initialised, kept across steps
//   opt->apply(w, g, state.data(), n, schedule.lr_at(step), /*t=*/step + 1);
//
// Semantics are those of torch.optim (dampening 0, no amsgrad/maximize/centered), with these differences:
//  - every rule takes both weight-decay modes: L2 (g += wd*w before the rule) and decoupled (w -= lr*wd*w, applied
//    to the weights before the rule's step, as torch.optim.AdamW does); adamw is decoupled whatever the mode;
//  - eps is optimizer.eps for every rule (PyTorch defaults differ per rule: adagrad 1e-10, adadelta 1e-6);
//  - rmsprop has no momentum and is not centered; its decay is optimizer.rho (PyTorch's alpha, default 0.99 there);
//  - adadelta: lr multiplies the delta as in PyTorch, whose default lr is 1.0 (set optimizer.lr = 1 for that);
//  - lars (You et al. 2017; not in torch.optim): d = g + wd*w, ratio = eta*||w|| / (||g|| + wd*||w||),
//    v = m*v + ratio*d, w -= lr*v. In decoupled mode d = g, ratio = eta*||w||/||g|| and w -= lr*wd*w.
//  - lamb (You et al. 2019, with Adam's bias correction): r = m_hat/(sqrt(v_hat)+eps); in decoupled mode
//    u = r + wd*w (the paper's form: decay inside the trust-scaled update), in L2 mode g += wd*w and u = r;
//    w -= lr * (||w||/||u||) * u.
//  - lars/lamb: the ratio is 1 when ||w|| or ||g|| (lars) / ||u|| (lamb) is 0. Norms are taken over the n elements
//    of ONE apply() call: per tensor when a tensor is not cut into slices, per slice otherwise. No ratio clipping,
//    and the ratio applies to every tensor (biases and norm layers included).
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual const char* name() const = 0;
  // Floats of state per parameter element (sgd 0, momentum 1, adam 2, ...); the caller allocates n * state_floats()
  // zeros. Layout: state_floats() planes of n floats each (plane k of element i at state[k*n + i]).
  virtual size_t state_floats() const = 0;
  // One update of n contiguous elements. lr: this step's learning rate (schedule already applied); t: 1-based count
  // of updates applied to these elements so far, this one included (bias correction). t < 1 is an Error.
  virtual void apply(float* w, const float* g, float* state, size_t n, float lr, int64_t t) const = 0;
  // True for rules whose step depends on norms over the whole layer (lars, lamb): applied per slice, a tensor cut
  // into several slices gets a ratio per slice, not the one `pshard train` computes (servers warn at init).
  virtual bool layer_wise() const { return false; }
};

// The rule named p.name; an unknown name or a hyper-parameter out of range is a pshard::Error naming it.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerParams& p);

}  // namespace pshard::optim
