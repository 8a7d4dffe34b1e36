// ResNet basic block (He et al. 2016): conv3x3-BN-ReLU-conv3x3-BN plus a shortcut, then ReLU.
#pragma once

#include <memory>
#include <string>

#include "models/layer.h"

namespace pshard::models {

class Conv2d;
class BatchNorm;

// How the shortcut matches shapes when a block changes the channel count or the resolution.
enum class Shortcut {
  kPad,         // option A: identity, subsampled by the stride, zero-padded channels (no parameters)
  kProjection,  // option B: 1x1 convolution with the stride, then BatchNorm
};

// Gradient scratch of ResidualBlock::backward, used only during one call: the blocks of one model share one (a model
// runs one layer's backward at a time), so it is as large as the largest block's, not the sum over the blocks.
struct ResidualScratch {
  ReusableBuffer ds, g1, g2, gx;
};

// Input {C, H, W}, output {out_channels, ceil(H / stride), ceil(W / stride)}. Parameters, in order:
// conv1.weight, bn1.weight, bn1.bias, conv2.weight, bn2.weight, bn2.bias and, with a projection shortcut,
// shortcut.0.weight, shortcut.1.weight, shortcut.1.bias (convolutions have no bias). projection_name replaces
// "shortcut" (torchvision's BasicBlock, which ResNet-18 is built of, names it "downsample").
//
//   ResidualBlock block(backend, {16, 32, 32}, /*out_channels=*/32, /*stride=*/2, Shortcut::kPad);
//   // blocks of one model: pass the same std::make_shared<ResidualScratch>() to each (null: a scratch of its own)
class ResidualBlock final : public Layer {
 public:
  ResidualBlock(Backend& backend, const std::vector<int64_t>& in_shape, int64_t out_channels, int64_t stride,
                Shortcut shortcut, std::shared_ptr<ResidualScratch> scratch = nullptr,
                std::string projection_name = "shortcut");
  ~ResidualBlock() override;
  const char* type() const override { return "ResidualBlock"; }
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

  int64_t stride_;
  bool identity_;  // same shape: plain identity shortcut
  Shortcut shortcut_;
  std::string projection_name_;
  std::unique_ptr<Conv2d> conv1_, conv2_, proj_conv_;
  std::unique_ptr<BatchNorm> bn1_, bn2_, proj_bn_;
  // Activations of the last forward (reused from step to step) and the gradient scratch.
  ReusableBuffer a1_, r1_, a2_, s_, sa_;
  std::shared_ptr<ResidualScratch> scratch_;
};

}  // namespace pshard::models
