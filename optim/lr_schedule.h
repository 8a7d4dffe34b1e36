// Learning-rate schedules: linear scaling rule, linear warmup, then constant, step or cosine decay.
#pragma once

#include <cstdint>
#include <string>

namespace pshard {
class Config;
}

namespace pshard::optim {

// From the config keys lr_schedule.* (common/config/schema.cc).
struct LrScheduleParams {
  std::string name = "constant";  // constant|step|cosine: the shape after warmup
  int64_t warmup_steps = 0;
  int64_t step_size = 1000;  // step: decay every step_size steps after warmup
  int64_t total_steps = 0;   // cosine: the step (counted from 0, warmup included) where lr reaches min_lr; 0 = the run
  float gamma = 0.1f;        // step: factor per decay
  float min_lr = 0.0f;       // cosine: final lr
  std::string scaling = "none";  // none|linear
  int64_t reference_batch = 64;  // linear: the batch base_lr was tuned for

  static LrScheduleParams from_config(const Config& cfg);
};

// The learning rate of every step, computed from the step alone (no state, so a resumed run gets the same lr).
//
//   peak = base_lr * (scaling == "linear" ? global_batch / reference_batch : 1)      (Goyal et al. 2017)
//   W = warmup_steps, s = step - W:
//   step <  W:  lr = peak * (step + 1) / W        (peak/W at step 0, ..., exactly peak at step W-1)
//   step >= W:  constant: peak
//               step:     peak * gamma^floor(s / step_size)
//               cosine:   min_lr + (peak - min_lr) * (1 + cos(pi * s / T)) / 2,  T = H - W, H = total_steps or,
//                         when 0, run_total_steps; lr = peak at step W, min_lr at step H and after.
//
//   LrSchedule sched(base_lr, params, workers * batch, steps_per_epoch * epochs);   // a job's: LrPolicy::schedule
//   float lr = sched.lr_at(step);   // step is 0-based
//
// Bad parameters (unknown name or scaling, cosine horizon <= warmup, batch < 1, ...) are a pshard::Error.
class LrSchedule {
 public:
  LrSchedule(float base_lr, const LrScheduleParams& params, int64_t global_batch, int64_t run_total_steps);

  // The lr of 0-based step `step` (< 0 is an Error).
  float lr_at(int64_t step) const;
  // The lr after warmup and before any decay (base_lr with the scaling rule applied).
  float peak_lr() const { return static_cast<float>(peak_); }

 private:
  enum class Shape { kConstant, kStep, kCosine };
  Shape shape_;
  double peak_;
  LrScheduleParams p_;
  int64_t horizon_;  // cosine: H
};

}  // namespace pshard::optim
