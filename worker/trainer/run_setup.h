// Builds what a training process needs from a config: data, backend, model.
#pragma once

#include <memory>
#include <string>
#include <vector>

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
  std::unique_ptr<models::Model> model;  // parameters initialised from run.seed, then train.init_from; train.freeze
  std::string init_report;               // train.init_from: what was loaded and reinitialised, for the log
};

// Loads the data set, creates the backend of `train.device` and the model of
// `model.*` shaped for the data. Errors name the config key at fault.
TrainingSetup make_training_setup(const Config& cfg);

// The CPU compute threads of a worker: train.threads when it is > 0; for 0, the cores this process may run on
// (its CPU affinity: a SLURM task's share, a taskset) divided by PSHARD_WORKERS_ON_HOST, the workers `pshard launch`
// started on this host, at least 1. Workers that each start one OpenMP thread per core spin at their barriers
// against each other (2 workers on 2 cores ran a Fashion-MNIST job 4x slower). Throws naming the variable when
// PSHARD_WORKERS_ON_HOST is not a positive integer.
int compute_threads(const Config& cfg);

// The prefixes of train.freeze ("conv1, layer1" -> {"conv1", "layer1"}); empty items are dropped.
std::vector<std::string> freeze_prefixes(const std::string& list);

// One line: "mlp 784-256-128-10, 235146 parameters (0.90 MiB), cpu (oneDNN, 2 threads)".
std::string describe_setup(const Config& cfg, const TrainingSetup& setup);

// Bytes of all parameters as float32.
int64_t model_bytes(const models::Model& model);

}  // namespace pshard::trainer
