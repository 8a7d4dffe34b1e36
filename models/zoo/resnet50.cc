// ResNet-50 (He et al. 2016, ImageNet layout, torchvision's resnet50): 3/4/6/3 bottleneck blocks; 25,557,032
// parameters with 1000 classes.
#include "models/zoo/imagenet_resnet.h"
#include "models/zoo/zoo.h"

namespace pshard::models::zoo {

namespace {

std::vector<Model::NamedLayer> build(const ModelSpec& spec, Backend& backend) {
  static const int kBlocks[4] = {3, 4, 6, 3};
  return build_imagenet_resnet("resnet50", ResNetBlock::kBottleneck, kBlocks, spec, backend);
}

}  // namespace

ModelInfo resnet50() {
  return {"resnet50",
          "ResNet-50 (ImageNet layout, torchvision's resnet50): conv7x7/2, max pool, 3/4/6/3 bottleneck blocks "
          "(256-2048 channels), global average pool, fc",
          build,
          {3, 224, 224},
          ModelTargets::kClasses};
}

}  // namespace pshard::models::zoo
