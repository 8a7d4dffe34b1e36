// ReLU activation: y = max(x, 0).
#pragma once

#include "models/layer.h"

namespace pshard::models {

// Any shape; no parameters. Backward uses the output (y > 0 exactly where x > 0).
//
//   ReLU relu(backend, {256});
class ReLU final : public Layer {
 public:
  ReLU(Backend& backend, std::vector<int64_t> shape) : Layer(backend, shape, shape) {}
  const char* type() const override { return "ReLU"; }
  void forward(const Tensor& x, const Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;
};

}  // namespace pshard::models
