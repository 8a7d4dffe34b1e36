// ResNet bottleneck block (He et al. 2016, ResNet-50 and deeper): conv1x1-BN-ReLU-conv3x3-BN-ReLU-conv1x1-BN plus a
// shortcut, then ReLU.
#pragma once

#include <memory>

#include "models/layer.h"

namespace pshard::models {

class Conv2d;
class BatchNorm;

// Gradient scratch of BottleneckBlock::backward, used only during one call: the blocks of one model share one.
struct BottleneckScratch {
  ReusableBuffer out_a, out_b, mid_a, mid_b, in_a, in_b, gx;
};

// Input {C, H, W}, output {4 * width, ceil(H / stride), ceil(W / stride)}. The stride is on the 3x3 convolution (as
// torchvision's ResNet "v1.5"). When the shape changes, the shortcut is a 1x1 convolution with the stride, then
// BatchNorm; otherwise the identity. Parameters, named as torchvision's Bottleneck: conv1.weight, bn1.weight,
// bn1.bias, conv2.weight, bn2.weight, bn2.bias, conv3.weight, bn3.weight, bn3.bias and, with a projection,
// downsample.0.weight, downsample.1.weight, downsample.1.bias (convolutions have no bias).
//
//   BottleneckBlock block(backend, {64, 56, 56}, /*width=*/64, /*stride=*/1);  // output {256, 56, 56}
class BottleneckBlock final : public Layer {
 public:
  static constexpr int64_t kExpansion = 4;

  BottleneckBlock(Backend& backend, const std::vector<int64_t>& in_shape, int64_t width, int64_t stride,
                  std::shared_ptr<BottleneckScratch> scratch = nullptr);
  ~BottleneckBlock() override;
  const char* type() const override { return "BottleneckBlock"; }
  std::vector<ParamDecl> param_decls() const override;
  void bind_params(const std::vector<float*>& values, const std::vector<float*>& grads) override;
  std::vector<BufferRef> buffers() override;
  void reset_state(uint64_t seed) override;
  void forward(const Tensor& x, const Tensor& y, bool train) override;
  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor* dx) override;

 private:
  struct Part {
    std::string name;  // "conv1", "bn1", ...
    Layer* layer;
  };
  std::vector<Part> parts() const;  // the layers with parameters or buffers, in parameter order

  std::unique_ptr<Conv2d> conv1_, conv2_, conv3_, proj_conv_;
  std::unique_ptr<BatchNorm> bn1_, bn2_, bn3_, proj_bn_;
  // Activations of the last forward (reused from step to step): the batch norms' inputs, the ReLU outputs and the
  // projection's.
  ReusableBuffer a1_, r1_, a2_, r2_, a3_, sa_, s_;
  std::shared_ptr<BottleneckScratch> scratch_;
};

}  // namespace pshard::models
