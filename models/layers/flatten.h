// Flatten: [n, C, H, W] -> [n, C*H*W] in NCHW order: a view (no copy), or a regrouping where the backend keeps C
// channels in blocks (Backend::channel_block).
#pragma once

#include "models/layer.h"

namespace pshard::models {

//   Flatten flat(backend, {50, 4, 4});   // output {800}
class Flatten final : public Layer {
 public:
  Flatten(Backend& backend, std::vector<int64_t> in_shape);
  const char* type() const override { return "Flatten"; }
  bool is_view() const override;
  // Copies (regroups when not a view), for callers that give separate buffers (the Model passes views instead).
  void forward(const Tensor& x, const Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;
};

}  // namespace pshard::models
