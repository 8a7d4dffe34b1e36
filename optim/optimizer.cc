// The optimizer factory: parameters from the config, validation, and the name -> rule table.
#include "optim/optimizer.h"

#include <cmath>
#include <sstream>
#include <utility>

#include "common/config/config.h"
#include "common/config/schema.h"
#include "common/error.h"
#include "optim/rules.h"

namespace pshard::optim {

namespace {

using Factory = std::unique_ptr<Optimizer> (*)(const OptimizerParams&);

struct Rule {
  const char* name;
  Factory make;
};

const Rule kRules[] = {
    {"sgd", detail::make_sgd},         {"momentum", detail::make_momentum}, {"nesterov", detail::make_nesterov},
    {"adagrad", detail::make_adagrad}, {"adadelta", detail::make_adadelta}, {"rmsprop", detail::make_rmsprop},
    {"adam", detail::make_adam},       {"adamw", detail::make_adamw},       {"lars", detail::make_lars},
    {"lamb", detail::make_lamb},       {"ftrl", detail::make_ftrl},
};

std::string rule_names() {
  std::string names;
  for (const std::string& n : optimizer_names()) names += (names.empty() ? "" : "|") + n;
  return names;
}

// The allowed range of each hyper-parameter is the config schema's (common/config/schema.cc): one
// table, so that docs/CONFIG.md advertises exactly what is accepted here.
void check_range(const OptimizerParams& p, const char* key, float value) {
  const std::string name = std::string("optimizer.") + key;
  const ConfigKey* k = find_config_key(name);
  if (k == nullptr) throw Error("optimizer: no config key " + name);  // a programming error, caught by tests
  if (!in_range(*k, value)) {
    std::ostringstream msg;
    msg << "optimizer " << p.name << ": " << name << " must be in " << range_text(*k) << ", got " << value;
    throw Error(msg.str());
  }
}

}  // namespace

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const Rule& r : kRules) names.push_back(r.name);
  return names;
}

OptimizerParams OptimizerParams::from_config(const Config& cfg) {
  OptimizerParams p;
  p.name = cfg.get_string("optimizer.name");
  p.lr = static_cast<float>(cfg.get_double("optimizer.lr"));
  p.momentum = static_cast<float>(cfg.get_double("optimizer.momentum"));
  p.beta1 = static_cast<float>(cfg.get_double("optimizer.beta1"));
  p.beta2 = static_cast<float>(cfg.get_double("optimizer.beta2"));
  p.rho = static_cast<float>(cfg.get_double("optimizer.rho"));
  p.eps = static_cast<float>(cfg.get_double("optimizer.eps"));
  p.weight_decay = static_cast<float>(cfg.get_double("optimizer.weight_decay"));
  p.trust_coefficient = static_cast<float>(cfg.get_double("optimizer.trust_coefficient"));
  p.ftrl_beta = static_cast<float>(cfg.get_double("optimizer.ftrl_beta"));
  p.ftrl_l1 = static_cast<float>(cfg.get_double("optimizer.ftrl_l1"));
  p.ftrl_l2 = static_cast<float>(cfg.get_double("optimizer.ftrl_l2"));
  p.decoupled_weight_decay = cfg.get_string("optimizer.weight_decay_mode") == "decoupled";
  return p;
}

OptimizerParams OptimizerParams::for_tables(const Config& cfg) {
  OptimizerParams p = from_config(cfg);
  const std::string rule = cfg.get_string("embedding.optimizer");
  if (rule != "same") p.name = rule;
  p.lr = static_cast<float>(cfg.get_double("embedding.lr"));
  p.eps = static_cast<float>(cfg.get_double("embedding.eps"));
  return p;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerParams& p) {
  const std::pair<const char*, float> values[] = {{"lr", p.lr},
                                                  {"momentum", p.momentum},
                                                  {"beta1", p.beta1},
                                                  {"beta2", p.beta2},
                                                  {"rho", p.rho},
                                                  {"eps", p.eps},
                                                  {"weight_decay", p.weight_decay},
                                                  {"trust_coefficient", p.trust_coefficient},
                                                  {"ftrl_beta", p.ftrl_beta},
                                                  {"ftrl_l1", p.ftrl_l1},
                                                  {"ftrl_l2", p.ftrl_l2}};
  for (const auto& [key, value] : values) check_range(p, key, value);
  for (const Rule& r : kRules) {
    if (p.name == r.name) return r.make(p);
  }
  throw Error("unknown optimizer '" + p.name + "' (optimizer.name must be one of " + rule_names() + ")");
}

namespace detail {

void check_step(const char* optimizer, int64_t t) {
  if (t < 1) {
    throw Error(std::string("optimizer ") + optimizer + ": update count t must be >= 1 (1-based), got " +
                std::to_string(t));
  }
}

}  // namespace detail
}  // namespace pshard::optim
