// Softmax (multinomial logistic) regression: one Linear layer trained with softmax cross-entropy.
#include "common/error.h"
#include "models/layers/linear.h"
#include "models/zoo/zoo.h"

namespace pshard::models::zoo {

namespace {

std::vector<Model::NamedLayer> build(const ModelSpec& spec, Backend& backend) {
  if (spec.num_classes <= 0) {
    throw Error("model softmax needs a classification data set (num_classes > 0); use linreg for regression");
  }
  std::vector<Model::NamedLayer> layers;
  int64_t in = flatten_input(spec, backend, layers);
  layers.push_back({"fc", std::make_unique<Linear>(backend, in, spec.num_classes)});
  return layers;
}

}  // namespace

ModelInfo softmax() {
  return {"softmax",
          "softmax (multinomial logistic) regression: one Linear layer, softmax cross-entropy",
          build,
          {1, 28, 28},
          ModelTargets::kClasses};
}

}  // namespace pshard::models::zoo
