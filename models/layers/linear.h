// Linear (fully connected) layer: y = x W^T + b, W of shape [out, in] as in PyTorch.
#pragma once

#include "models/layer.h"

namespace pshard::models {

// Input [n, in_features], output [n, out_features]. Parameters "weight" [out, in] and "bias" [out], initialised
// U(-1/sqrt(in), 1/sqrt(in)) like torch.nn.Linear.
//
//   Linear fc(backend, 784, 256);
class Linear final : public Layer {
 public:
  Linear(Backend& backend, int64_t in_features, int64_t out_features, bool bias = true);
  const char* type() const override { return "Linear"; }
  std::vector<ParamDecl> param_decls() const override;
  void bind_params(const std::vector<float*>& values, const std::vector<float*>& grads) override;
  void forward(const Tensor& x, const Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;

 private:
  int64_t in_, out_;
  bool has_bias_;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
};

}  // namespace pshard::models
