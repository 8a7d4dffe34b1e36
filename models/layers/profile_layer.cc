// Profile layer: sleeps of the layer's measured times, zero placeholder activations, fixed gradients.
#include "models/layers/profile_layer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "models/cpu/kernels.h"

namespace pshard::models {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kGradTable = 4096;  // distinct gradient values per tensor, repeated

}  // namespace

ProfileLayer::ProfileLayer(Backend& backend, std::vector<int64_t> in_shape, std::vector<int64_t> out_shape,
                           std::vector<ParamDecl> params, double forward_ms, double backward_ms, int64_t batch,
                           std::shared_ptr<ProfilePace> pace, bool first)
    : Layer(backend, std::move(in_shape), std::move(out_shape)),
      params_(std::move(params)),
      forward_ms_(forward_ms),
      backward_ms_(backward_ms),
      batch_(batch),
      pace_(std::move(pace)),
      first_(first) {
  if (!pace_) throw Error("ProfileLayer: no pace");
  if (!(forward_ms >= 0 && backward_ms >= 0 && std::isfinite(forward_ms) && std::isfinite(backward_ms))) {
    throw Error("ProfileLayer: times must be finite and >= 0 ms, got forward " + std::to_string(forward_ms) +
                ", backward " + std::to_string(backward_ms));
  }
  if (batch <= 0) throw Error("ProfileLayer: the batch of the times must be > 0, got " + std::to_string(batch));
  if (!backend.host_accessible()) {
    throw Error("ProfileLayer: needs host-accessible memory (the CPU backend), got " + backend.describe());
  }
}

void ProfileLayer::bind_params(const std::vector<float*>&, const std::vector<float*>& grads) {
  grads_ = grads;
  grads_written_ = false;
}

void ProfileLayer::reset_state(uint64_t seed) {
  grad_seed_ = seed;
  grads_written_ = false;
}

void ProfileLayer::wait(double ms_at_batch, int64_t n) {
  const double ms = ms_at_batch * static_cast<double>(n) / static_cast<double>(batch_);
  const double shortened = ms - pace_->late_ms;
  const auto start = Clock::now();
  if (shortened > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(shortened));
  const double slept = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  pace_->late_ms = std::max(0.0, pace_->late_ms + slept - ms);
}

void ProfileLayer::forward(const Tensor& x, const Tensor& y, bool) {
  if (first_) pace_->late_ms = 0;
  wait(forward_ms_, x.dim(0));
  backend_.fill(y.data(), y.numel(), 0.0f);
}

void ProfileLayer::backward(const Tensor& x, const Tensor&, const Tensor&, const Tensor* dx) {
  wait(backward_ms_, x.dim(0));
  if (!grads_written_) write_grads();
  if (dx) backend_.fill(dx->data(), dx->numel(), 0.0f);
}

void ProfileLayer::write_grads() {
  for (size_t i = 0; i < grads_.size(); ++i) {
    float table[kGradTable];
    for (size_t j = 0; j < kGradTable; ++j) {
      const uint64_t h = cpu::mix64(cpu::mix64(grad_seed_ + i) + j);
      table[j] = static_cast<float>((static_cast<double>(h >> 11) * (2.0 / 9007199254740992.0) - 1.0) * 1e-3);
    }
    const size_t n = static_cast<size_t>(shape_numel(params_[i].shape));
    for (size_t done = 0; done < n; done += kGradTable) {
      std::memcpy(grads_[i] + done, table, std::min(kGradTable, n - done) * sizeof(float));
    }
  }
  grads_written_ = true;
}

}  // namespace pshard::models
