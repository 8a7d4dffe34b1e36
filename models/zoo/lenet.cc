// LeNet (the Caffe/PyTorch MNIST variant): conv5x5(20) -> ReLU -> maxpool -> conv5x5(50) -> ReLU -> maxpool ->
// fc(500) -> ReLU [-> dropout] -> fc(classes). 28x28x1: 431,080 parameters; 32x32x3: 657,080.
#include "common/error.h"
#include "models/layers/conv2d.h"
#include "models/layers/dropout.h"
#include "models/layers/flatten.h"
#include "models/layers/linear.h"
#include "models/layers/maxpool2d.h"
#include "models/layers/relu.h"
#include "models/zoo/zoo.h"

namespace pshard::models::zoo {

namespace {

std::vector<Model::NamedLayer> build(const ModelSpec& spec, Backend& backend) {
  if (spec.input_shape.size() != 3) {
    throw Error("model lenet needs image input {C, H, W}, got " + shape_to_string(spec.input_shape));
  }
  std::vector<Model::NamedLayer> layers;
  auto add = [&](std::string name, std::unique_ptr<Layer> layer) {
    layers.push_back({std::move(name), std::move(layer)});
    return layers.back().layer->output_shape();
  };
  std::vector<int64_t> s = spec.input_shape;
  s = add("conv1", std::make_unique<Conv2d>(backend, s, 20, 5));
  s = add("relu1", std::make_unique<ReLU>(backend, s));
  s = add("pool1", std::make_unique<MaxPool2d>(backend, s, 2, 2));
  s = add("conv2", std::make_unique<Conv2d>(backend, s, 50, 5));
  s = add("relu2", std::make_unique<ReLU>(backend, s));
  s = add("pool2", std::make_unique<MaxPool2d>(backend, s, 2, 2));
  s = add("flatten", std::make_unique<Flatten>(backend, s));
  s = add("fc1", std::make_unique<Linear>(backend, s[0], 500));
  s = add("relu3", std::make_unique<ReLU>(backend, s));
  if (spec.dropout > 0.0f) s = add("dropout", std::make_unique<Dropout>(backend, s, spec.dropout));
  add("fc2", std::make_unique<Linear>(backend, s[0], outputs_of(spec)));
  return layers;
}

}  // namespace

ModelInfo lenet() {
  return {"lenet",
          "LeNet CNN: conv5x5(20), maxpool, conv5x5(50), maxpool, fc(500) [+ Dropout], fc",
          build,
          {1, 28, 28},
          ModelTargets::kClassesOrRegression};
}

}  // namespace pshard::models::zoo
