// The local training run (see local_training.h).
#include "worker/trainer/local_training.h"

#include <chrono>
#include <cstdio>
#include <memory>

#include "common/config/config.h"
#include "common/config/job_shape.h"
#include "common/error.h"
#include "common/metrics/epoch_report.h"
#include "common/metrics/metrics_writer.h"
#include "common/metrics/progress.h"
#include "common/run/run_directory.h"
#include "common/util/log.h"
#include "worker/trainer/local_sync.h"
#include "worker/trainer/model_file.h"
#include "worker/trainer/run_setup.h"
#include "worker/trainer/trainer.h"

namespace pshard::trainer {

namespace {

// The training of run_local_training in `run_dir`, claimed.
int train_in(const Config& cfg, const std::string& run_dir, std::chrono::steady_clock::time_point start) {
  TrainingSetup setup = make_training_setup(cfg);
  std::printf("pshard train: %s\n", describe_setup(cfg, setup).c_str());
  if (!setup.init_report.empty()) std::printf("pshard train: %s\n", setup.init_report.c_str());
  TrainerOptions opts = TrainerOptions::from_config(cfg, 0, 1);
  const int64_t steps = steps_per_epoch_for(setup.data.train.size(), 1, opts.batch_size) * opts.epochs;
  LocalSync sync(cfg, opts.batch_size, steps);
  Trainer t(opts, *setup.model, setup.data, sync);

  MetricsWriter metrics(run_dir);
  metrics.write_file("config.toml", cfg.to_toml());
  RunTotals totals;
  std::unique_ptr<GpuSampler> gpu = make_gpu_sampler(JobShape::from_config(cfg).cuda());
  t.run([&](const StepEvent& s) { metrics.write(s.to_json()); },
        [&](const WorkerEpochReport& epoch) {
          WorkerEpochReport r = epoch;
          r.take_gpu_usage(gpu.get());
          Json e = combine_epoch({r});
          metrics.write(e);
          totals.add_epoch(e);
          std::printf("%s\n", format_epoch_line(e, opts.epochs).c_str());
          std::fflush(stdout);
        });

  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Json summary = totals.summary(wall_s);
  summary.set("model", cfg.get_string("model.name"))
      .set("optimizer", cfg.get_string("optimizer.name"))
      .set("lr", cfg.get_double("optimizer.lr"))
      .set("batch_size", opts.batch_size)
      .set("global_batch", opts.batch_size)
      .set("model_bytes", model_bytes(*setup.model))
      .set("workers", 1)
      .set("servers", 0)
      .set("mode", "local")
      .set("model_file", run_dir + "/model.bin");
  save_model_file(*setup.model, run_dir + "/model.bin");
  metrics.write(summary);
  std::printf("%s\n", format_summary_line(summary, run_dir).c_str());
  if (!metrics.complete()) {
    std::fprintf(stderr, "pshard train: the run's records in %s are incomplete (a metrics write failed: see above)\n",
                 run_dir.c_str());
    return kExitRecordsIncomplete;
  }
  return 0;
}

}  // namespace

int run_local_training(const LocalTrainingOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  Config cfg = Config::from_file(o.config_path, o.overrides);
  log::configure("train", log::level_from_string(cfg.get_string("log.level")));
  const NewRunDir chosen = claim_new_run_dir(o.run_dir, cfg.get_string("run.name"), o.start_over, "pshard train", "");
  const std::string& run_dir = chosen.path;
  if (!chosen.moved_to.empty()) {
    std::printf("pshard train: --start-over: moved the old run to %s\n", chosen.moved_to.c_str());
  }
  std::printf("run directory: %s\n", run_dir.c_str());
  write_run_id(run_dir, new_run_id());

  // Refused before the first step (a data set smaller than one batch, say): the new run gives its directory back,
  // so that the corrected command may use it.
  try {
    return train_in(cfg, run_dir, start);
  } catch (...) {
    give_back_untrained_run_dir(run_dir);
    throw;
  }
}

}  // namespace pshard::trainer
