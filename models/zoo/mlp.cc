// Multi-layer perceptron: [Flatten] -> (Linear -> ReLU [-> Dropout]) per hidden size -> Linear.
#include "common/error.h"
#include "models/layers/dropout.h"
#include "models/layers/flatten.h"
#include "models/layers/linear.h"
#include "models/layers/mse.h"
#include "models/layers/relu.h"
#include "models/layers/softmax_cross_entropy.h"
#include "models/zoo/zoo.h"

namespace pshard::models::zoo {

std::unique_ptr<Loss> loss_for(const ModelSpec& spec, Backend& backend) {
  if (spec.num_classes > 0) return std::make_unique<SoftmaxCrossEntropy>(backend);
  return std::make_unique<MeanSquaredError>(backend);
}

int64_t outputs_of(const ModelSpec& spec) { return spec.num_classes > 0 ? spec.num_classes : spec.target_dim; }

int64_t flatten_input(const ModelSpec& spec, Backend& backend, std::vector<Model::NamedLayer>& layers) {
  if (spec.input_shape.size() > 1) layers.push_back({"flatten", std::make_unique<Flatten>(backend, spec.input_shape)});
  return shape_numel(spec.input_shape);
}

namespace {

std::vector<Model::NamedLayer> build(const ModelSpec& spec, Backend& backend) {
  if (spec.hidden.empty())
    throw Error("model mlp: model.hidden is empty (use model.name = softmax for no hidden layer)");
  std::vector<Model::NamedLayer> layers;
  int64_t in = flatten_input(spec, backend, layers);
  int k = 1;
  for (int64_t h : spec.hidden) {
    if (h <= 0) throw Error("model mlp: hidden size " + std::to_string(h) + " in model.hidden must be > 0");
    std::string id = std::to_string(k++);
    layers.push_back({"fc" + id, std::make_unique<Linear>(backend, in, h)});
    layers.push_back({"relu" + id, std::make_unique<ReLU>(backend, std::vector<int64_t>{h})});
    if (spec.dropout > 0.0f) {
      layers.push_back({"dropout" + id, std::make_unique<Dropout>(backend, std::vector<int64_t>{h}, spec.dropout)});
    }
    in = h;
  }
  layers.push_back({"fc" + std::to_string(k), std::make_unique<Linear>(backend, in, outputs_of(spec))});
  return layers;
}

}  // namespace

ModelInfo mlp() {
  return {"mlp",
          "multi-layer perceptron: Linear + ReLU [+ Dropout] per model.hidden size, then Linear",
          build,
          {1, 28, 28},
          ModelTargets::kClassesOrRegression};
}

}  // namespace pshard::models::zoo
