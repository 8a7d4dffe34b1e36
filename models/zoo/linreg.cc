// Linear regression: one Linear layer trained with MSE.
#include "common/error.h"
#include "models/layers/linear.h"
#include "models/zoo/zoo.h"

namespace pshard::models::zoo {

namespace {

std::vector<Model::NamedLayer> build(const ModelSpec& spec, Backend& backend) {
  if (spec.num_classes > 0) {
    throw Error("model linreg is a regression model but the data set has " + std::to_string(spec.num_classes) +
                " classes (use model.name = softmax)");
  }
  std::vector<Model::NamedLayer> layers;
  int64_t in = flatten_input(spec, backend, layers);
  layers.push_back({"fc", std::make_unique<Linear>(backend, in, spec.target_dim)});
  return layers;
}

}  // namespace

ModelInfo linreg() {
  return {
      "linreg", "linear regression: one Linear layer trained with MSE", build, {1, 28, 28}, ModelTargets::kRegression};
}

}  // namespace pshard::models::zoo
