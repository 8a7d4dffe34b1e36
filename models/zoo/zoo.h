// The model zoo: layer lists of the named models (internal to Model::create).
#pragma once

#include <memory>
#include <vector>

#include "models/model.h"

namespace pshard::models::zoo {

std::vector<Model::NamedLayer> linreg(const ModelSpec& spec, Backend& backend);    // linreg.cc
std::vector<Model::NamedLayer> softmax(const ModelSpec& spec, Backend& backend);   // softmax.cc
std::vector<Model::NamedLayer> mlp(const ModelSpec& spec, Backend& backend);       // mlp.cc
std::vector<Model::NamedLayer> lenet(const ModelSpec& spec, Backend& backend);     // lenet.cc
std::vector<Model::NamedLayer> resnet20(const ModelSpec& spec, Backend& backend);  // resnet20.cc

// Softmax cross-entropy with classes, MSE for regression (mlp.cc).
std::unique_ptr<Loss> loss_for(const ModelSpec& spec, Backend& backend);
// Number of model outputs: num_classes or target_dim (mlp.cc).
int64_t outputs_of(const ModelSpec& spec);
// Appends a Flatten when the input is {C, H, W}; returns the number of input features (mlp.cc).
int64_t flatten_input(const ModelSpec& spec, Backend& backend, std::vector<Model::NamedLayer>& layers);

}  // namespace pshard::models::zoo
