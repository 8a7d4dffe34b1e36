// Test helper: a whole `pshard train` run in this process (LocalSync), its epoch reports and final weights.
#pragma once

#include <cstdint>
#include <vector>

#include "common/config/config.h"
#include "common/metrics/epoch_report.h"
#include "models/model.h"
#include "worker/trainer/local_sync.h"
#include "worker/trainer/run_setup.h"
#include "worker/trainer/trainer.h"

namespace pshard::testing {

struct TrainedRun {
  std::vector<WorkerEpochReport> epochs;
  std::vector<std::vector<float>> params;
};

inline TrainedRun train(const Config& cfg) {
  trainer::TrainingSetup setup = trainer::make_training_setup(cfg);
  trainer::TrainerOptions opts = trainer::TrainerOptions::from_config(cfg, 0, 1);
  const int64_t steps = trainer::steps_per_epoch_for(setup.data.train.size(), 1, opts.batch_size) * opts.epochs;
  trainer::LocalSync sync(cfg, opts.batch_size, steps);
  trainer::Trainer t(opts, *setup.model, setup.data, sync);
  TrainedRun run;
  t.run({}, [&](const WorkerEpochReport& r) { run.epochs.push_back(r); });
  for (const models::ParamRef& p : setup.model->params()) run.params.emplace_back(p.value, p.value + p.numel);
  return run;
}

}  // namespace pshard::testing
