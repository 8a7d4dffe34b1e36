// Max pooling over k x k windows.
#pragma once

#include "models/layer.h"

namespace pshard::models {

// Input {C, H, W}, output {C, H_out, W_out}; the gradient goes to the first maximum of each window.
//
//   MaxPool2d pool(backend, {20, 24, 24}, /*kernel=*/2, /*stride=*/2);
class MaxPool2d final : public Layer {
 public:
  MaxPool2d(Backend& backend, const std::vector<int64_t>& in_shape, int64_t kernel, int64_t stride,
            int64_t padding = 0);
  const char* type() const override { return "MaxPool2d"; }
  void forward(const Tensor& x, const Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;

 private:
  PoolShape geometry_;  // n = 0
};

// Checks a {C, H, W} input and returns the pooling geometry (n = 0); shared by MaxPool2d and AvgPool2d.
PoolShape pool_geometry(const char* layer, const std::vector<int64_t>& in_shape, int64_t kernel, int64_t stride,
                        int64_t padding);

}  // namespace pshard::models
