// The ImageNet-layout ResNets (He et al. 2016, as torchvision builds them), shared by resnet18.cc and resnet50.cc.
#pragma once

#include <vector>

#include "models/model.h"

namespace pshard::models::zoo {

// Which residual block the four stages are made of.
enum class ResNetBlock {
  kBasic,       // two 3x3 convolutions (ResidualBlock with a projection shortcut): ResNet-18/34
  kBottleneck,  // 1x1, 3x3, 1x1 with 4x expansion (BottleneckBlock): ResNet-50/101/152
};

// Stem conv7x7/2 (64) - BN - ReLU - maxpool3x3/2 (padding 1), four stages of blocks[i] blocks (64/128/256/512
// channels, times 4 for bottlenecks; stride 2 in the first block of stages 2-4, with a 1x1 projection + BN where the
// shape changes), global average pooling, fc. Layer and parameter names are torchvision's state_dict keys (conv1,
// bn1, layer1.0.conv1, ..., layer2.0.downsample.0, fc), so a converted torchvision model loads by name. An Error
// (naming `model`) for an input that is not {C, H, W} with square H = W of at least 32.
std::vector<Model::NamedLayer> build_imagenet_resnet(const char* model, ResNetBlock block, const int (&blocks)[4],
                                                     const ModelSpec& spec, Backend& backend);

}  // namespace pshard::models::zoo
