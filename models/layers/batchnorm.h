// Batch normalisation (BatchNorm2d for {C, H, W} inputs, BatchNorm1d for {F}).
#pragma once

#include "models/layer.h"

namespace pshard::models {

// Training: normalises with the batch statistics per channel and updates the running statistics
// (r = (1 - momentum) r + momentum * batch, unbiased variance, as PyTorch). Evaluation: uses the running statistics.
// Parameters "weight" (gamma, init 1) and "bias" (beta, init 0); buffers "running_mean" (init 0) and "running_var"
// (init 1), which are state of the worker, not parameters.
//
//   BatchNorm bn(backend, {16, 32, 32});
class BatchNorm final : public Layer {
 public:
  BatchNorm(Backend& backend, std::vector<int64_t> shape, float momentum = 0.1f, float eps = 1e-5f);
  const char* type() const override { return "BatchNorm"; }
  std::vector<ParamDecl> param_decls() const override;
  void bind_params(const std::vector<float*>& values, const std::vector<float*>& grads) override;
  std::vector<BufferRef> buffers() override;
  void reset_state(uint64_t seed) override;
  void forward(const Tensor& x, const Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;

 private:
  int64_t c_, hw_;
  float momentum_, eps_;
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  Tensor running_mean_, running_var_, save_mean_, save_invstd_;
  ReusableBuffer dx_scratch_;  // backward writes dx even when the caller does not need it
};

}  // namespace pshard::models
