// Average pooling over k x k windows (global average pooling when the window is the whole map).
#pragma once

#include "models/layer.h"

namespace pshard::models {

// Input {C, H, W}, output {C, H_out, W_out}; padded cells count as zeros (PyTorch count_include_pad=True).
//
//   AvgPool2d gap(backend, {64, 8, 8}, /*kernel=*/8, /*stride=*/8);   // -> {64, 1, 1}
class AvgPool2d final : public Layer {
 public:
  AvgPool2d(Backend& backend, const std::vector<int64_t>& in_shape, int64_t kernel, int64_t stride,
            int64_t padding = 0);
  const char* type() const override { return "AvgPool2d"; }
  void forward(const Tensor& x, const Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;

 private:
  PoolShape geometry_;
};

}  // namespace pshard::models
