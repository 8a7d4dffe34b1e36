// Profile layer: one layer of a real architecture, its parameters declared at their real shapes and its compute
// replaced by waits of the layer's measured time (the layers of profile models, models/zoo/profile.h).
#pragma once

#include <cstdint>
#include <vector>

#include "models/layer.h"

namespace pshard::models {

// Declares `params` and, instead of computing, sleeps: forward() for forward_ms x n / batch and backward() for
// backward_ms x n / batch over n samples (the times were measured at `batch` samples and scale linearly). The
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
//   ProfileLayer conv1(backend, {1, 1, 1}, {1}, {{"weight", {64, 3, 7, 7}}}, /*forward_ms=*/1.2,
//                      /*backward_ms=*/2.4, /*batch=*/64);
class ProfileLayer final : public Layer {
 public:
  ProfileLayer(Backend& backend, std::vector<int64_t> in_shape, std::vector<int64_t> out_shape,
               std::vector<ParamDecl> params, double forward_ms, double backward_ms, int64_t batch);
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
  void write_grads();

  std::vector<ParamDecl> params_;
  double forward_ms_, backward_ms_;
  int64_t batch_;
  std::vector<float*> grads_;
  uint64_t grad_seed_ = 0;
  bool grads_written_ = false;
};

}  // namespace pshard::models
