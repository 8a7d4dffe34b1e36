// Loss scaling (train.loss_scaling): the scale backward starts from, the check of a step's gradients and the rule
// that changes the scale, for the trainer's steps.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pshard {
class Config;
}
namespace pshard::models {
class Backend;
struct ParamRef;
}  // namespace pshard::models

namespace pshard::trainer {

// PyTorch GradScaler's rule with its defaults: a skipped step (gradients not finite on some worker) halves a dynamic
// scale; `growth_interval` applied steps in a row double it. A static scale never changes.
//
//   LossScaler s = LossScaler::from_config(cfg);
//   model.set_loss_scale(s.scale());  ... backward ...
//   const bool finite = s.unscale(model.backend(), model.params());
//   const bool applied = sync.finish_scaled(finite, params);   // the same answer on every worker
//   s.update(applied);
class LossScaler {
 public:
  enum class Mode { kNone, kDynamic, kStatic };
  LossScaler() = default;
  LossScaler(Mode mode, float scale, int64_t growth_interval);
  // train.loss_scaling (its auto resolved by the config: dynamic for train.precision = fp16, none otherwise),
  // train.loss_scale, train.loss_scale_growth_interval.
  static LossScaler from_config(const Config& cfg);

  bool active() const { return mode_ != Mode::kNone; }
  Mode mode() const { return mode_; }
  float scale() const { return scale_; }
  int64_t skipped() const { return skipped_; }  // steps skipped since the start

  // Divides the trainable parameters' gradients by the scale (multiplies them by the float 1/scale, as GradScaler
  // does: exact for a power of two) and says whether every value is finite. The gradients are the backend's memory
  // (device memory on a GPU: unscaled and checked there).
  bool unscale(models::Backend& backend, const std::vector<models::ParamRef>& params) const;
  // After the workers agreed whether the step was applied (true) or skipped (false). An Error when the run is not
  // going anywhere: 100 steps skipped in a row, or a dynamic scale below 2^-24.
  void update(bool applied);
  // A resumed run's scaler as the run left it at `sync_step`: from the start, each data step in `skipped` (the
  // run's skipped steps) is replayed as skipped and every other one as applied, until `sync_step` were applied.
  // skipped() is then the steps the run skipped before `sync_step`.
  void replay(const std::set<int64_t>& skipped, int64_t sync_step);

 private:
  Mode mode_ = Mode::kNone;
  float scale_ = 1.0f;
  int64_t growth_interval_ = 2000;
  int64_t clean_ = 0;  // applied steps since the scale last changed (or since a skip)
  int64_t skipped_ = 0;
  int64_t skipped_in_a_row_ = 0;
};

// "dynamic", "static", "none".
// The data steps a run skipped (loss scaling), from the step lines of RUN_DIR/metrics.jsonl and of the runs before
// its resumes (metrics.jsonl.before-step-K): every worker logs each step it skips, whatever train.log_every. nullopt
// when there is no such file or one cannot be read.
std::optional<std::set<int64_t>> skipped_steps_in(const std::string& run_dir);

const char* loss_scaling_name(LossScaler::Mode mode);

}  // namespace pshard::trainer
