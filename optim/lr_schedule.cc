// Learning-rate schedules: linear scaling rule, linear warmup, constant/step/cosine decay.
#include "optim/lr_schedule.h"

#include <cmath>

#include "common/config/config.h"
#include "common/error.h"

namespace pshard::optim {

LrScheduleParams LrScheduleParams::from_config(const Config& cfg) {
  LrScheduleParams p;
  p.name = cfg.get_string("lr_schedule.name");
  p.warmup_steps = cfg.get_int("lr_schedule.warmup_steps");
  p.step_size = cfg.get_int("lr_schedule.step_size");
  p.total_steps = cfg.get_int("lr_schedule.total_steps");
  p.gamma = static_cast<float>(cfg.get_double("lr_schedule.gamma"));
  p.min_lr = static_cast<float>(cfg.get_double("lr_schedule.min_lr"));
  p.scaling = cfg.get_string("lr_schedule.scaling");
  p.reference_batch = cfg.get_int("lr_schedule.reference_batch");
  return p;
}

namespace {

[[noreturn]] void fail(const std::string& what) { throw Error("lr schedule: " + what); }

}  // namespace

LrSchedule::LrSchedule(float base_lr, const LrScheduleParams& params, int64_t global_batch, int64_t run_total_steps)
    : shape_(Shape::kConstant), peak_(base_lr), p_(params), horizon_(0) {
  if (p_.name == "constant") {
    shape_ = Shape::kConstant;
  } else if (p_.name == "step") {
    shape_ = Shape::kStep;
  } else if (p_.name == "cosine") {
    shape_ = Shape::kCosine;
  } else {
    fail("unknown lr_schedule.name '" + p_.name + "' (one of constant|step|cosine)");
  }
  if (!std::isfinite(base_lr) || base_lr < 0) fail("base lr must be finite and >= 0, got " + std::to_string(base_lr));
  if (p_.warmup_steps < 0) fail("lr_schedule.warmup_steps must be >= 0, got " + std::to_string(p_.warmup_steps));

  if (p_.scaling == "linear") {
    if (p_.reference_batch < 1) {
      fail("lr_schedule.reference_batch must be >= 1, got " + std::to_string(p_.reference_batch));
    }
    if (global_batch < 1) fail("linear scaling needs a global batch >= 1, got " + std::to_string(global_batch));
    peak_ = static_cast<double>(base_lr) * static_cast<double>(global_batch) / static_cast<double>(p_.reference_batch);
  } else if (p_.scaling != "none") {
    fail("unknown lr_schedule.scaling '" + p_.scaling + "' (one of none|linear)");
  }

  if (shape_ == Shape::kStep) {
    if (p_.step_size < 1) fail("lr_schedule.step_size must be >= 1, got " + std::to_string(p_.step_size));
    if (!std::isfinite(p_.gamma) || p_.gamma < 0) {
      fail("lr_schedule.gamma must be finite and >= 0, got " + std::to_string(p_.gamma));
    }
  }
  if (shape_ == Shape::kCosine) {
    horizon_ = p_.total_steps > 0 ? p_.total_steps : run_total_steps;
    if (horizon_ <= p_.warmup_steps) {
      fail("cosine needs lr_schedule.total_steps (or, when 0, the run's " + std::to_string(run_total_steps) +
           " steps) > lr_schedule.warmup_steps, got " + std::to_string(horizon_) +
           " <= " + std::to_string(p_.warmup_steps));
    }
    if (!std::isfinite(p_.min_lr) || p_.min_lr < 0) {
      fail("lr_schedule.min_lr must be finite and >= 0, got " + std::to_string(p_.min_lr));
    }
  }
}

float LrSchedule::lr_at(int64_t step) const {
  if (step < 0) fail("step must be >= 0, got " + std::to_string(step));
  const int64_t warmup = p_.warmup_steps;
  if (step < warmup) return static_cast<float>(peak_ * static_cast<double>(step + 1) / static_cast<double>(warmup));
  const int64_t s = step - warmup;
  switch (shape_) {
    case Shape::kConstant: return static_cast<float>(peak_);
    case Shape::kStep: return static_cast<float>(peak_ * std::pow(static_cast<double>(p_.gamma), s / p_.step_size));
    case Shape::kCosine: {
      const int64_t span = horizon_ - warmup;
      if (s >= span) return p_.min_lr;
      const double pi = std::acos(-1.0);
      const double cos_part = 0.5 * (1.0 + std::cos(pi * static_cast<double>(s) / static_cast<double>(span)));
      return static_cast<float>(p_.min_lr + (peak_ - p_.min_lr) * cos_part);
    }
  }
  return static_cast<float>(peak_);
}

}  // namespace pshard::optim
