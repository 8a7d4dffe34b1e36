// In-process optimizer steps for `pshard train`.
#include "worker/trainer/local_sync.h"

#include "common/config/config.h"
#include "common/error.h"
#include "models/layers/embedding.h"
#include "models/model.h"
#include "worker/trainer/batch_rows.h"

namespace pshard::trainer {

LocalSync::LocalSync(const Config& cfg, int64_t global_batch, int64_t total_steps)
    : LocalSync(optim::OptimizerParams::from_config(cfg), optim::LrScheduleParams::from_config(cfg), global_batch,
                total_steps) {
  const optim::OptimizerParams tables = optim::OptimizerParams::for_tables(cfg);
  const TableSettings settings = TableSettings::from_config(cfg);
  try {
    set_tables(tables, settings);
  } catch (const Error& e) {
    throw Error(std::string("embedding.optimizer: ") + e.what());
  }
}

void LocalSync::set_tables(const optim::OptimizerParams& rule, const TableSettings& settings) {
  table_optimizer_ = optim::make_optimizer(rule);
  table_lr_ = rule.lr;
  tables_settings_ = settings;
}

LocalSync::LocalSync(const optim::OptimizerParams& optimizer, const optim::LrScheduleParams& schedule,
                     int64_t global_batch, int64_t total_steps)
    : optimizer_(optim::make_optimizer(optimizer)), schedule_(optimizer.lr, schedule, global_batch, total_steps) {}

void LocalSync::start(models::Model& model) {
  model_ = &model;
  staging_ = std::make_unique<DeviceStaging>(model);
  staging_->download_all_weights();  // CUDA: the host copy is the master copy the optimizer updates
  state_.clear();
  for (const models::ParamRef& p : model.params()) {
    state_.emplace_back(static_cast<size_t>(p.numel) * optimizer_->state_floats(), 0.0f);
  }
  tables_.clear();
  if (const models::Embedding* layer = model.embedding()) {
    if (!table_optimizer_) throw Error("embedding tables need a job config for their optimizer (embedding.*)");
    const std::string refused = table_rule_refusal(*table_optimizer_);  // only a model with tables cares
    if (!refused.empty()) throw Error(refused);
    for (const TableSpec& spec : table_specs(*layer, tables_settings_)) {
      tables_.push_back(std::make_unique<EmbeddingShard>(spec, 0, 1, tables_settings_.seed, *table_optimizer_));
    }
  }
}

void LocalSync::pull_rows(int64_t, BatchRows& rows) {
  for (int64_t f = 0; f < rows.fields(); ++f) {
    const EmbeddingShard& table = *tables_.at(static_cast<size_t>(f));
    const std::vector<uint64_t>& ids = rows.ids(f);
    float* out = rows.values(f);
    for (size_t i = 0; i < ids.size(); ++i) table.read(ids[i], out + i * table.spec().dim);
  }
}

void LocalSync::push_rows(int64_t step, const BatchRows& rows) {
  for (int64_t f = 0; f < rows.fields(); ++f) {
    const std::vector<uint64_t>& ids = rows.ids(f);
    tables_.at(static_cast<size_t>(f))
        ->close_step(ids.data(), rows.grads(f), ids.size(), *table_optimizer_, table_lr_, step);
  }
}

void LocalSync::end_step(int64_t step) {
  const float lr = schedule_.lr_at(step);
  const auto& params = model_->params();
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].frozen) staging_->begin_grad_download(i);
  }
  // CUDA: the last step's uploads read the host weights until now; later kernels are ordered after them on the
  // device, so the host waits for them only here, before it writes the weights again (not at the end of each step).
  staging_->finish_uploads();
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].frozen) continue;  // train.freeze: kept as loaded
    staging_->wait_grad(i);
    optimizer_->apply(staging_->weights(i), staging_->grads(i), state_[i].data(), static_cast<size_t>(params[i].numel),
                      lr, step + 1);
    staging_->begin_weight_upload(i);  // while the host updates the next parameter
  }
}

void LocalSync::skip_step(int64_t) {
  staging_->finish_uploads();  // as end_step: the next step's uploads reuse the buffers
}

}  // namespace pshard::trainer
