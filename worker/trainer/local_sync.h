// ParameterSync for single-process training: the optimizer runs in-process.
#pragma once

#include <memory>
#include <vector>

#include "optim/embedding_shard.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "worker/trainer/batch_rows.h"
#include "worker/trainer/device_staging.h"
#include "worker/trainer/parameter_sync.h"

namespace pshard {
class Config;
}

namespace pshard::trainer {

// Applies the configured optimizer and learning-rate schedule to every
// parameter after each step, with the same library the servers use, so
// `pshard train` is the reference a distributed run is compared with.
class LocalSync : public ParameterSync {
 public:
  // global_batch: samples per step; total_steps: of the whole run (cosine).
  LocalSync(const Config& cfg, int64_t global_batch, int64_t total_steps);
  // The same without a job config (`pshard bench compute`): optimizer.lr is the base learning rate.
  LocalSync(const optim::OptimizerParams& optimizer, const optim::LrScheduleParams& schedule, int64_t global_batch,
            int64_t total_steps);

  // The tables' rule (`rule`, at rule.lr) and how their rows are made, for the constructor without a job config
  // (`pshard bench compute`); the other reads them from embedding.* and run.seed. start() refuses a rule the
  // tables cannot use (table_rule_refusal) when the model has tables.
  void set_tables(const optim::OptimizerParams& rule, const TableSettings& settings);

  void start(models::Model& model) override;
  void begin_step(int64_t) override {}
  void wait_layer(int) override {}
  void grads_ready(int, int) override {}
  void end_step(int64_t step) override;
  void skip_step(int64_t) override;
  void sync_all() override {}
  // Embedding tables: held here whole, updated as one server of a sync job updates its rows (embedding.optimizer at
  // embedding.lr, row by row, update count step + 1), so that a job's tables can be compared with this reference.
  void pull_rows(int64_t step, BatchRows& rows) override;
  void wait_rows() override {}
  void push_rows(int64_t step, const BatchRows& rows) override;
  double lr_at(int64_t step) const override { return schedule_.lr_at(step); }
  SyncStats stats() const override { return {}; }

 private:
  std::unique_ptr<optim::Optimizer> optimizer_;
  optim::LrSchedule schedule_;
  models::Model* model_ = nullptr;
  std::unique_ptr<DeviceStaging> staging_;  // CUDA: host copies the optimizer works on (uploads finish lazily)
  std::vector<std::vector<float>> state_;   // per parameter: numel * state_floats()
  // The tables' rule and learning rate (from the config; none without one), the seed their rows are made from, and
  // the tables (one shard holding every row).
  std::unique_ptr<optim::Optimizer> table_optimizer_;
  float table_lr_ = 0;
  TableSettings tables_settings_;
  std::vector<std::unique_ptr<EmbeddingShard>> tables_;
};

}  // namespace pshard::trainer
