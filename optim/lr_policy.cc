// LrPolicy: the job's learning-rate policy from its config.
#include "optim/lr_policy.h"

#include <algorithm>

#include "common/config/config.h"
#include "common/config/job_shape.h"
#include "common/error.h"

namespace pshard::optim {

LrPolicy LrPolicy::from_config(const Config& cfg) {
  LrPolicy p;
  p.base_lr = static_cast<float>(cfg.get_double("optimizer.lr"));
  p.shape = LrScheduleParams::from_config(cfg);
  p.batch_size = cfg.get_int("train.batch_size");
  const JobShape job = JobShape::from_config(cfg);
  for (int64_t b : job.worker_batches) p.uneven_global_batch += b;
  if (job.elastic()) {
    p.global_batch = job.elastic_global_batch ? GlobalBatch::kFixedWorkers : GlobalBatch::kStepWorkers;
    p.fixed_workers = job.elastic_global_batch ? job.min_workers : 0;
  }
  return p;
}

uint32_t LrPolicy::batch_workers(uint32_t num_workers, uint32_t step_workers) const {
  switch (global_batch) {
    case GlobalBatch::kAllWorkers: return std::max<uint32_t>(num_workers, 1);
    case GlobalBatch::kFixedWorkers: return std::max<uint32_t>(fixed_workers, 1);
    case GlobalBatch::kStepWorkers: return std::max<uint32_t>(step_workers, 1);
  }
  return 1;
}

LrSchedule LrPolicy::schedule(uint32_t workers, int64_t run_total_steps) const {
  if (shape.name == "cosine" && shape.total_steps == 0 && run_total_steps <= 0) {
    throw Error("lr schedule: a cosine schedule needs the run's length (the run's steps, or lr_schedule.total_steps)");
  }
  const int64_t global = uneven_global_batch > 0 ? uneven_global_batch : batch_size * static_cast<int64_t>(workers);
  return LrSchedule(base_lr, shape, global, std::max<int64_t>(run_total_steps, 1));
}

}  // namespace pshard::optim
