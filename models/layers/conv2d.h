// 2-D convolution layer (NCHW, square kernel, stride, zero padding).
#pragma once

#include "models/layer.h"

namespace pshard::models {

// Input {C, H, W} per sample, output {out_channels, H_out, W_out}. Parameters "weight" [out, C, k, k] and (with
// bias) "bias" [out], initialised U(-1/sqrt(C*k*k), 1/sqrt(C*k*k)) like torch.nn.Conv2d.
//
//   Conv2d conv(backend, {3, 32, 32}, /*out_channels=*/16, /*kernel=*/3, /*stride=*/1, /*padding=*/1);
class Conv2d final : public Layer {
 public:
  Conv2d(Backend& backend, const std::vector<int64_t>& in_shape, int64_t out_channels, int64_t kernel,
         int64_t stride = 1, int64_t padding = 0, bool bias = true);
  const char* type() const override { return "Conv2d"; }
  std::vector<ParamDecl> param_decls() const override;
  void bind_params(const std::vector<float*>& values, const std::vector<float*>& grads) override;
  void forward(const Tensor& x, const Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;
  // The geometry for a batch of n.
  ConvShape shape_for(int64_t n) const;

 private:
  ConvShape geometry_;  // n = 0
  bool has_bias_;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
};

}  // namespace pshard::models
