// The model zoo by name: every model.name pshard can build, in one table (models/zoo/registry.cc).
//
//   const ModelInfo& lenet = model_info("lenet");  // an Error naming the known models if there is none
//   for (const ModelInfo& m : registered_models()) std::printf("%s: %s\n", m.name, m.description);
//
// Model::create(spec, backend) builds spec.name through this table. Adding a model: models/zoo/<name>.cc with its
// builder and a function returning its ModelInfo, that function's declaration in models/zoo/zoo.h, one line in the
// table in registry.cc, and a test in tests/models/ (model_registry_test runs every registered model already).
// The config key model.name takes its allowed values from here (installed by app/main.cc, listed by
// `pshard config --list`), and so do `pshard bench compute --model` and its default --input.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"

namespace pshard::models {

// The data sets a model fits: classification (num_classes > 0), regression (num_classes = 0), or both.
enum class ModelTargets { kClasses, kRegression, kClassesOrRegression };

// One named model.
struct ModelInfo {
  // The layer list of the model for `spec` (spec.name is this model); an Error when the spec does not fit it.
  using Builder = std::vector<Model::NamedLayer> (*)(const ModelSpec& spec, Backend& backend);

  const char* name;                    // model.name: "lenet"
  const char* description;             // one line: what it is
  Builder build;                       // the layers (the loss follows from num_classes)
  std::vector<int64_t> example_input;  // sample shape it is usually run on: bench compute's default --input
  ModelTargets targets;                // what it can be trained on
  bool embedding_tables = false;       // it reads embedding tables, one per categorical field (ModelSpec::table_rows)
};

// Every model, in table order (simplest first).
const std::vector<ModelInfo>& registered_models();
// The model called `name`, or nullptr.
const ModelInfo* find_model(const std::string& name);
// The model called `name`; an Error "unknown model 'x' (model.name must be one of linreg, softmax, ...)" otherwise.
const ModelInfo& model_info(const std::string& name);
// The names in table order.
std::vector<std::string> model_names();
// The names in table order between `separator`s: "linreg|softmax|mlp|lenet|resnet20" for "|".
std::string join_model_names(const std::string& separator);

}  // namespace pshard::models
