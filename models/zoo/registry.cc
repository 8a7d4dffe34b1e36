// The model table: name -> builder and metadata, one line per model of models/zoo/.
#include "models/zoo/registry.h"

#include "common/error.h"
#include "models/zoo/zoo.h"

namespace pshard::models {

const std::vector<ModelInfo>& registered_models() {
  // Listed here explicitly (not registered by static objects in each file, which a static library may drop).
  static const std::vector<ModelInfo> table = {
      zoo::linreg(),    // linreg.cc
      zoo::softmax(),   // softmax.cc
      zoo::mlp(),       // mlp.cc
      zoo::lenet(),     // lenet.cc
      zoo::resnet20(),  // resnet20.cc
      zoo::resnet18(),  // resnet18.cc
      zoo::resnet50(),  // resnet50.cc
      zoo::profile(),   // profile.cc
      zoo::dlrm(),      // dlrm.cc
  };
  return table;
}

const ModelInfo* find_model(const std::string& name) {
  for (const ModelInfo& m : registered_models()) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

const ModelInfo& model_info(const std::string& name) {
  if (const ModelInfo* m = find_model(name)) return *m;
  throw Error("unknown model '" + name + "' (model.name must be one of " + join_model_names(", ") + ")");
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const ModelInfo& m : registered_models()) names.push_back(m.name);
  return names;
}

std::string join_model_names(const std::string& separator) {
  std::string joined;
  for (const ModelInfo& m : registered_models()) joined += (joined.empty() ? "" : separator) + m.name;
  return joined;
}

}  // namespace pshard::models
