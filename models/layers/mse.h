// Mean squared error loss for regression.
#pragma once

#include "models/layer.h"

namespace pshard::models {

// out, targets [n, dim]. Per-sample loss = mean over dim of (out - target)^2, so the mean over the batch equals
// torch.nn.MSELoss() (mean over all n * dim elements).
//
//   MeanSquaredError loss(backend);
class MeanSquaredError final : public Loss {
 public:
  explicit MeanSquaredError(Backend& backend) : backend_(backend) {}
  const char* type() const override { return "MeanSquaredError"; }
  void forward(const Tensor& out, const int32_t* labels, const float* targets, double* loss_sum,
               int64_t* correct) override;
  void backward(const Tensor& out, const int32_t* labels, const float* targets, const Tensor& dout) override;

 private:
  Backend& backend_;
};

}  // namespace pshard::models
