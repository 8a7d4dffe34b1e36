// ReLU activation through the backend.
#include "models/layers/relu.h"

namespace pshard::models {

void ReLU::forward(const Tensor& x, const Tensor& y, bool) { backend_.relu_forward(x.data(), y.data(), x.numel()); }

void ReLU::backward(const Tensor&, const Tensor& y, const Tensor& dy, const Tensor* dx) {
  if (dx) backend_.relu_backward(y.data(), dy.data(), dx->data(), y.numel());
}

}  // namespace pshard::models
