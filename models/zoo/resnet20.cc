// ResNet-20 for 32x32 images (He et al. 2016, CIFAR): conv3x3(16)-BN-ReLU, 3 stages x 3 basic blocks
// (16/32/64 channels, stride 2 at stages 2 and 3), global average pooling, fc. Option-A shortcut: 269,722
// parameters with 10 classes.
#include <memory>

#include "common/error.h"
#include "models/layers/avgpool2d.h"
#include "models/layers/batchnorm.h"
#include "models/layers/conv2d.h"
#include "models/layers/flatten.h"
#include "models/layers/linear.h"
#include "models/layers/relu.h"
#include "models/layers/residual_block.h"
#include "models/zoo/zoo.h"

namespace pshard::models::zoo {

namespace {

std::vector<Model::NamedLayer> build(const ModelSpec& spec, Backend& backend) {
  if (spec.input_shape.size() != 3) {
    throw Error("model resnet20 needs image input {C, H, W}, got " + shape_to_string(spec.input_shape));
  }
  Shortcut shortcut;
  if (spec.shortcut == "pad") {
    shortcut = Shortcut::kPad;
  } else if (spec.shortcut == "projection") {
    shortcut = Shortcut::kProjection;
  } else {
    throw Error("model resnet20: model.shortcut must be pad or projection, got '" + spec.shortcut + "'");
  }
  std::vector<Model::NamedLayer> layers;
  auto add = [&](std::string name, std::unique_ptr<Layer> layer) {
    layers.push_back({std::move(name), std::move(layer)});
    return layers.back().layer->output_shape();
  };
  std::vector<int64_t> s = spec.input_shape;
  s = add("conv1", std::make_unique<Conv2d>(backend, s, 16, 3, 1, 1, false));
  s = add("bn1", std::make_unique<BatchNorm>(backend, s));
  s = add("relu", std::make_unique<ReLU>(backend, s));
  const int64_t widths[3] = {16, 32, 64};
  auto scratch = std::make_shared<ResidualScratch>();  // one gradient scratch for the nine blocks
  for (int stage = 0; stage < 3; ++stage) {
    for (int b = 0; b < 3; ++b) {
      const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      s = add("layer" + std::to_string(stage + 1) + "." + std::to_string(b),
              std::make_unique<ResidualBlock>(backend, s, widths[stage], stride, shortcut, scratch));
    }
  }
  // Global average pooling over the whole (square or not) map.
  if (s[1] != s[2]) throw Error("model resnet20 needs square images, got " + shape_to_string(spec.input_shape));
  s = add("avgpool", std::make_unique<AvgPool2d>(backend, s, s[1], s[1]));
  s = add("flatten", std::make_unique<Flatten>(backend, s));
  add("fc", std::make_unique<Linear>(backend, s[0], outputs_of(spec)));
  return layers;
}

}  // namespace

ModelInfo resnet20() {
  return {"resnet20",
          "ResNet-20: conv3x3, 3 stages x 3 basic blocks (16/32/64 channels), global average pool, fc",
          build,
          {3, 32, 32},
          ModelTargets::kClassesOrRegression};
}

}  // namespace pshard::models::zoo
