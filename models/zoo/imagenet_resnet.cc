// The stem, stages and head of the ImageNet-layout ResNets.
#include "models/zoo/imagenet_resnet.h"

#include <memory>
#include <string>

#include "common/error.h"
#include "models/layers/avgpool2d.h"
#include "models/layers/batchnorm.h"
#include "models/layers/bottleneck_block.h"
#include "models/layers/conv2d.h"
#include "models/layers/flatten.h"
#include "models/layers/linear.h"
#include "models/layers/maxpool2d.h"
#include "models/layers/relu.h"
#include "models/layers/residual_block.h"
#include "models/zoo/zoo.h"

namespace pshard::models::zoo {

std::vector<Model::NamedLayer> build_imagenet_resnet(const char* model, ResNetBlock block, const int (&blocks)[4],
                                                     const ModelSpec& spec, Backend& backend) {
  const std::vector<int64_t>& in = spec.input_shape;
  // Five halvings (stem conv, max pool, stages 2-4) leave a 1x1 map at 32x32; smaller inputs would leave nothing.
  if (in.size() != 3 || in[1] != in[2] || in[1] < 32) {
    throw Error(std::string("model ") + model + " needs square image input {C, H, W} with H = W >= 32, got " +
                shape_to_string(in));
  }
  if (spec.num_classes <= 0) {
    throw Error(std::string("model ") + model +
                " is a classifier: it needs a data set with classes, not regression targets");
  }
  std::vector<Model::NamedLayer> layers;
  auto add = [&](std::string name, std::unique_ptr<Layer> layer) {
    layers.push_back({std::move(name), std::move(layer)});
    return layers.back().layer->output_shape();
  };
  std::vector<int64_t> s = in;
  s = add("conv1", std::make_unique<Conv2d>(backend, s, 64, 7, 2, 3, false));
  s = add("bn1", std::make_unique<BatchNorm>(backend, s));
  s = add("relu", std::make_unique<ReLU>(backend, s));
  s = add("maxpool", std::make_unique<MaxPool2d>(backend, s, 3, 2, 1));
  // One gradient scratch for all blocks of a kind (a model runs one layer's backward at a time).
  auto basic_scratch = std::make_shared<ResidualScratch>();
  auto bottleneck_scratch = std::make_shared<BottleneckScratch>();
  const int64_t widths[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    for (int b = 0; b < blocks[stage]; ++b) {
      const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      if (block == ResNetBlock::kBasic) {
        s = add(name, std::make_unique<ResidualBlock>(backend, s, widths[stage], stride, Shortcut::kProjection,
                                                      basic_scratch, "downsample"));
      } else {
        s = add(name, std::make_unique<BottleneckBlock>(backend, s, widths[stage], stride, bottleneck_scratch));
      }
    }
  }
  // Global average pooling (torchvision's AdaptiveAvgPool2d(1)) over the square map.
  s = add("avgpool", std::make_unique<AvgPool2d>(backend, s, s[1], s[1]));
  s = add("flatten", std::make_unique<Flatten>(backend, s));
  add("fc", std::make_unique<Linear>(backend, s[0], outputs_of(spec)));
  return layers;
}

}  // namespace pshard::models::zoo
