// ResNet-18 (He et al. 2016, ImageNet layout, torchvision's resnet18): 4 stages of 2 basic blocks; 11,689,512
// parameters with 1000 classes.
#include "models/zoo/imagenet_resnet.h"
#include "models/zoo/zoo.h"

namespace pshard::models::zoo {

namespace {

std::vector<Model::NamedLayer> build(const ModelSpec& spec, Backend& backend) {
  static const int kBlocks[4] = {2, 2, 2, 2};
  return build_imagenet_resnet("resnet18", ResNetBlock::kBasic, kBlocks, spec, backend);
}

}  // namespace

ModelInfo resnet18() {
  return {"resnet18",
          "ResNet-18 (ImageNet layout, torchvision's resnet18): conv7x7/2, max pool, 4 stages x 2 basic blocks (64-512 "
          "channels), global average pool, fc",
          build,
          {3, 224, 224},
          ModelTargets::kClasses};
}

}  // namespace pshard::models::zoo
