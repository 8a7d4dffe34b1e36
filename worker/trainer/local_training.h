// `pshard train`: a whole training run in this process, no servers (the local reference for distributed runs).
#pragma once

#include <string>
#include <vector>

namespace pshard::trainer {

struct LocalTrainingOptions {
  std::string config_path;             // the experiment config
  std::vector<std::string> overrides;  // --set KEY=VALUE
  std::string run_dir;                 // metrics, config.toml, model.bin; "" = the first of runs/<run.name>,
                                       // runs/<run.name>.1, ... that holds no run (common/run/run_directory.h)
  bool start_over = false;             // run_dir holds a run: move it to RUN_DIR.old-N instead of refusing
};

// Trains as the config says, printing a line per epoch and the summary; writes RUN_DIR/metrics.jsonl,
// metrics.csv, config.toml and model.bin. Returns the exit status; throws pshard::Error for a bad config
// or data.
//
//   LocalTrainingOptions o;
//   o.config_path = "configs/fmnist_mlp.toml";
//   return run_local_training(o);
int run_local_training(const LocalTrainingOptions& options);

}  // namespace pshard::trainer
