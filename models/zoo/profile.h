// Profile models (model.name = profile): a real architecture's parameter tensors and per-layer times, read from a
// profile file, with the compute replaced by waits, so that communication can be studied at real sizes on any
// machine. The trainer runs them on its real path: it waits for each layer's weights before that layer's forward
// and pushes each layer's gradients as soon as its backward has slept (models/layers/profile_layer.h).
//
// A profile file is JSON (profiles/*.json are written by scripts/make_profiles.py):
//
//   {"name": "resnet50",                       required: what architecture
//    "source": "forward FLOPs of ... scaled",  required: how the times were made
//    "batch": 64,                              required: the batch the times are for (1 .. 2^20)
//    "classes": 1000,                          required: outputs of the last layer (2 .. 2^20) = data.classes
//    "precision": "fp32",                      optional: fp32 | bf16 | fp16, the precision the times are for
//    "step_ms": 250,                           optional: the whole step at `batch`, >= the layers' sum (the rest,
//                                              e.g. the optimizer, is not simulated)
//    "input_shape": [3, 224, 224],             optional: the real model's sample shape (not used for the data)
//    "layers": [                               required, not empty, in forward order
//      {"name": "conv1", "forward_ms": 1.2, "backward_ms": 2.4,        times >= 0 at `batch`
//       "params": [{"name": "weight", "shape": [64, 3, 7, 7]}]}, ...]}  params may be empty
//
// Names are 1 to 256 printable ASCII characters without spaces, quotes or backslashes; a parameter's tensor is
// "<layer>.<param>" (conv1.weight) and must be unique. Every dimension is 1 .. 2^31, a tensor at most 2^31
// elements, the model at most 2^33. Unknown fields are refused (a misspelt "forward_sm" is not silently 0).
//
//   ModelProfile p = read_model_profile("profiles/resnet50.json");  // an Error naming the file and the fault
//   std::printf("%s: %lld parameters\n", p.name.c_str(), static_cast<long long>(p.num_params()));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pshard::models {

// The contents of a profile file, checked.
struct ModelProfile {
  struct Param {
    std::string name;  // "weight"
    std::vector<int64_t> shape;
  };
  struct Layer {
    std::string name;  // "layer1.0.conv1"
    double forward_ms = 0, backward_ms = 0;
    std::vector<Param> params;
  };

  std::string origin;  // the file it was read from
  std::string name, source, precision;
  int64_t batch = 0;
  int64_t classes = 0;
  double step_ms = 0;  // 0 when the file gives none
  std::vector<int64_t> input_shape;
  std::vector<Layer> layers;

  int64_t num_params() const;  // elements of all parameter tensors
  double forward_ms() const;   // sum over the layers, at batch
  double backward_ms() const;  // sum over the layers, at batch
};

// Parses and checks a profile; every error starts with "model profile <origin>: " and names the field at fault.
ModelProfile parse_model_profile(const std::string& text, const std::string& origin);
// The same from a file.
ModelProfile read_model_profile(const std::string& path);

}  // namespace pshard::models
