// Profile layer: one layer of a real architecture, its parameters declared at their real shapes and its compute
// replaced by waits of the layer's measured time (the layers of profile models, models/zoo/profile.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "models/layer.h"

namespace pshard::models {

// How late the sleeps of a model's current pass have ended, shared by its profile layers (one thread runs a model).
// A sleep ends late by the scheduler's wake-up delay (0.05 to 0.5 ms, more on a loaded machine); with a hundred
// layers that would add 10 to 25 % to a ResNet-50 step. So each sleep is shortened by the lateness so far (never
// below zero), and the pace restarts at the first layer's forward: from there to the end of any layer's forward or
// backward, at least the sum of the profile's times has passed, and at most that plus one wake-up delay.
struct ProfilePace {
  double late_ms = 0;
};

// Declares `params` and, instead of computing, sleeps: forward() for forward_ms x n / batch and backward() for
// backward_ms x n / batch over n samples (the times were measured at `batch` samples and scale linearly), paced
// by `pace` (the first layer of a model restarts it). The
// activations are tiny placeholders: forward() writes zeros to its output (the next profile layer ignores it; the
// last layer's zeros are the logits, so the loss is ln(classes) on every step) and backward() writes zeros to dx.
//
// Gradients: backward() leaves every parameter gradient holding small, finite, deterministic values (a table of
// 4096 numbers in [-1e-3, 1e-3] drawn from the reset_state() seed, repeated over the tensor). They are written by
// the first backward after reset_state() and never again: the gradient buffers are only read after a backward
// (optimizers, the push, compression encoders and error feedback all read them as const and keep their own state),
// so the values stay in place and every later backward costs its sleep alone. The weights never change what a
// profile layer computes.
//
// Host memory only: the model refuses backends that are not host-accessible (the CUDA backend).
//
//   auto pace = std::make_shared<ProfilePace>();
//   ProfileLayer conv1(backend, {1, 1, 1}, {1}, {{"weight", {64, 3, 7, 7}}}, /*forward_ms=*/1.2,
//                      /*backward_ms=*/2.4, /*batch=*/64, pace, /*first=*/true);
class ProfileLayer final : public Layer {
 public:
  ProfileLayer(Backend& backend, std::vector<int64_t> in_shape, std::vector<int64_t> out_shape,
               std::vector<ParamDecl> params, double forward_ms, double backward_ms, int64_t batch,
               std::shared_ptr<ProfilePace> pace, bool first);
  const char* type() const override { return "Profile"; }
  std::vector<ParamDecl> param_decls() const override { return params_; }
  void bind_params(const std::vector<float*>& values, const std::vector<float*>& grads) override;
  // The gradient values are drawn again from `seed` at the next backward (Model::init_params zeroes them first).
  void reset_state(uint64_t seed) override;
  void forward(const Tensor& x, const Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;

  double forward_ms() const { return forward_ms_; }    // at batch()
  double backward_ms() const { return backward_ms_; }  // at batch()
  int64_t batch() const { return batch_; }

 private:
  void wait(double ms_at_batch, int64_t n);
  void write_grads();

  std::vector<ParamDecl> params_;
  double forward_ms_, backward_ms_;
  int64_t batch_;
  std::shared_ptr<ProfilePace> pace_;
  bool first_;
  std::vector<float*> grads_;
  uint64_t grad_seed_ = 0;
  bool grads_written_ = false;
};

}  // namespace pshard::models
