// Builds what a training process needs from a config: data, backend, model.
#pragma once

#include <memory>
#include <string>

#include "models/backend.h"
#include "models/model.h"
#include "worker/data/dataset.h"

namespace pshard {
class Config;
}

namespace pshard::trainer {

struct TrainingSetup {
  data::DataSplits data;
  std::unique_ptr<models::Backend> backend;
  std::unique_ptr<models::Model> model;  // parameters initialised from run.seed
};

// Loads the data set, creates the backend of `train.device` and the model of
// `model.*` shaped for the data. Errors name the config key at fault.
TrainingSetup make_training_setup(const Config& cfg);

// One line: "mlp 784-256-128-10, 235146 parameters (0.90 MiB), cpu (oneDNN, 2 threads)".
std::string describe_setup(const Config& cfg, const TrainingSetup& setup);

// Bytes of all parameters as float32.
int64_t model_bytes(const models::Model& model);

}  // namespace pshard::trainer
