// Loss scaling: unscaling with the finiteness check, and the scale's rule.
#include "worker/trainer/loss_scaler.h"

#include <cstdio>
#include <cstring>

#include "common/config/config.h"
#include "common/error.h"
#include "models/model.h"

namespace pshard::trainer {
namespace {

constexpr float kBackoff = 0.5f;  // GradScaler's defaults
constexpr float kGrowth = 2.0f;
// A run that skips this many steps in a row, or whose dynamic scale falls below kMinScale, is not going anywhere.
constexpr int64_t kMaxSkippedInARow = 100;
constexpr float kMinScale = 5.9604645e-8f;  // 2^-24

}  // namespace

LossScaler::LossScaler(Mode mode, float scale, int64_t growth_interval)
    : mode_(mode), scale_(mode == Mode::kNone ? 1.0f : scale), growth_interval_(growth_interval) {
  if (!(scale_ > 0.0f) || growth_interval_ < 1) {
    throw Error("loss scaling: the scale must be positive and the growth interval at least 1");
  }
}

LossScaler LossScaler::from_config(const Config& cfg) {
  const std::string name = cfg.get_string("train.loss_scaling");
  Mode mode = Mode::kNone;
  if (name == "dynamic") mode = Mode::kDynamic;  // "auto" was resolved when the config was read
  if (name == "static") mode = Mode::kStatic;
  return LossScaler(mode, static_cast<float>(cfg.get_double("train.loss_scale")),
                    cfg.get_int("train.loss_scale_growth_interval"));
}

bool LossScaler::unscale(models::Backend& backend, const std::vector<models::ParamRef>& params) const {
  const float inv = static_cast<float>(1.0 / static_cast<double>(scale_));
  std::vector<std::pair<float*, int64_t>> grads;
  for (const models::ParamRef& p : params) {
    if (!p.frozen) grads.emplace_back(p.grad, p.numel);
  }
  return backend.scale_and_check(grads, inv);
}

void LossScaler::update(bool applied) {
  if (applied) {
    skipped_in_a_row_ = 0;
  } else {
    ++skipped_;
    ++skipped_in_a_row_;
  }
  if (mode_ == Mode::kDynamic && !applied) {
    scale_ *= kBackoff;
    clean_ = 0;
  }
  if (!applied && (skipped_in_a_row_ >= kMaxSkippedInARow || scale_ < kMinScale)) {
    // %g: 2^-25 prints as 2.98023e-08 (std::to_string's %f gave "0.000000"); a static scale never went down.
    char scale[32];
    std::snprintf(scale, sizeof scale, "%g", static_cast<double>(scale_));
    throw Error("training diverged: " + std::to_string(skipped_in_a_row_) +
                " steps in a row were skipped, their gradients not finite on some worker, at loss scale " +
                (mode_ == Mode::kDynamic ? "down to " : "") + scale + " (train.loss_scaling = " +
                loss_scaling_name(mode_) + "); lower optimizer.lr, or check the data for NaN and infinities");
  }
  if (mode_ != Mode::kDynamic || !applied) return;
  if (++clean_ >= growth_interval_) {
    scale_ *= kGrowth;
    clean_ = 0;
  }
}

const char* loss_scaling_name(LossScaler::Mode mode) {
  switch (mode) {
    case LossScaler::Mode::kDynamic: return "dynamic";
    case LossScaler::Mode::kStatic: return "static";
    case LossScaler::Mode::kNone: break;
  }
  return "none";
}

}  // namespace pshard::trainer
