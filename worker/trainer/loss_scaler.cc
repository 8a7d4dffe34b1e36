// Loss scaling: unscaling with the finiteness check, and the scale's rule.
#include "worker/trainer/loss_scaler.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/config/config.h"
#include "common/error.h"
#include "common/util/binary_file.h"
#include "common/util/json.h"
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

void LossScaler::replay(const std::set<int64_t>& skipped, int64_t sync_step) {
  for (int64_t data_step = 0, applied = 0; applied < sync_step; ++data_step) {
    const bool skip = skipped.count(data_step) != 0;
    update(!skip);
    applied += skip ? 0 : 1;
  }
}

std::optional<std::set<int64_t>> skipped_steps_in(const std::string& run_dir) {
  // Each resume keeps the metrics of the run before it as metrics.jsonl.before-step-K; a deterministic run skips the
  // same data steps in each, so their union is the run's.
  std::vector<std::string> files;
  std::error_code ec;
  if (run_dir.empty()) return std::nullopt;
  for (const auto& e : std::filesystem::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == "metrics.jsonl" || name.rfind("metrics.jsonl.before-step-", 0) == 0) files.push_back(e.path());
  }
  if (files.empty()) return std::nullopt;
  std::set<int64_t> skipped;
  try {
    for (const std::string& path : files) {
      std::istringstream lines(binary::read_file(path, "metrics file", binary::kMaxTextFileBytes));
      for (std::string line; std::getline(lines, line);) {
        // Only a step line says "skipped": the others are not parsed.
        if (line.find("\"skipped\":true") == std::string::npos) continue;
        const Json e = Json::parse(line, path);
        if (e.at("event").as_string() == "step") skipped.insert(e.at("step").as_int());
      }
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  return skipped;
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
