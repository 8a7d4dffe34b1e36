// Mean squared error through the backend.
#include "models/layers/mse.h"

#include "common/error.h"

namespace pshard::models {

void MeanSquaredError::forward(const Tensor& out, const int32_t*, const float* targets, double* loss_sum,
                               int64_t* correct) {
  if (!targets) throw Error("mean squared error needs regression targets");
  backend_.mse_forward(out.data(), targets, out.dim(0), out.numel() / out.dim(0), loss_sum);
  *correct = 0;
}

void MeanSquaredError::backward(const Tensor& out, const int32_t*, const float* targets, const Tensor& dout) {
  backend_.mse_backward(out.data(), targets, out.dim(0), out.numel() / out.dim(0), dout.data());
}

}  // namespace pshard::models
