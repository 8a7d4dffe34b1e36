// The model zoo: one file per model, each defining its ModelInfo (listed in the table of registry.cc), and the
// helpers the model files share.
#pragma once

#include <memory>
#include <vector>

#include "models/model.h"
#include "models/zoo/registry.h"

namespace pshard::models::zoo {

ModelInfo linreg();    // linreg.cc
ModelInfo softmax();   // softmax.cc
ModelInfo mlp();       // mlp.cc
ModelInfo lenet();     // lenet.cc
ModelInfo resnet20();  // resnet20.cc
ModelInfo resnet18();  // resnet18.cc
ModelInfo resnet50();  // resnet50.cc
ModelInfo profile();   // profile.cc
ModelInfo dlrm();      // dlrm.cc

// Softmax cross-entropy with classes, MSE for regression (mlp.cc).
std::unique_ptr<Loss> loss_for(const ModelSpec& spec, Backend& backend);
// Number of model outputs: num_classes or target_dim (mlp.cc).
int64_t outputs_of(const ModelSpec& spec);
// Appends a Flatten when the input is {C, H, W}; returns the number of input features (mlp.cc).
int64_t flatten_input(const ModelSpec& spec, Backend& backend, std::vector<Model::NamedLayer>& layers);

}  // namespace pshard::models::zoo
