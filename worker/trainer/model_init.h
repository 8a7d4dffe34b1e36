// Initialising a model from named tensors (a model file: pshard's own, or a PyTorch state_dict converted by
// scripts/torch_to_pshard.py): transfer learning's starting point.
#pragma once

#include <string>
#include <vector>

#include "worker/trainer/model_file.h"

namespace pshard::models {
class Model;
}

namespace pshard::trainer {

// What init_from_tensors did, by tensor name.
struct ModelInitReport {
  std::vector<std::string> loaded;         // parameters and buffers copied from the file
  std::vector<std::string> reinitialised;  // shape differs (a classifier for other classes): "fc.weight [5, 512] (file
                                           // [1000, 512])", left at the model's own initialisation
  std::vector<std::string> not_in_file;    // buffers the file lacks (a pshard model file has no running statistics)
  std::vector<std::string> unused;         // tensors of the file the model does not have
  // "loaded 102 tensors; reinitialised (shape differs): fc.weight ..., fc.bias ...; ..." for the log.
  std::string describe() const;
};

// Copies each parameter and buffer (BatchNorm running statistics) of `model` from the tensor of the same name and
// shape, after the model's own initialisation. A tensor whose shape differs keeps the model's initialisation and is
// reported (the classifier when the number of classes changes). An Error naming `source` and the tensors when a
// parameter is missing from the file (another architecture, or not a model of this kind), or when nothing matched.
ModelInitReport init_from_tensors(models::Model& model, const std::vector<NamedTensor>& tensors,
                                  const std::string& source);

}  // namespace pshard::trainer
