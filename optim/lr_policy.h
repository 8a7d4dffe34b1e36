// The job's learning-rate policy, read once from the config and carried whole: the servers apply it, pshard's workers
// and the C API report it. One place says what a step's global batch is.
#pragma once

#include <cstdint>

#include "optim/lr_schedule.h"

namespace pshard {
class Config;
}

namespace pshard::optim {

// Whose batches make a step's global batch (the linear scaling rule's):
//   kAllWorkers:   every worker of the job (cluster.num_workers), whoever pushed;
//   kFixedWorkers: a fixed count (an elastic job with cluster.elastic_batch = global: cluster.min_workers);
//   kStepWorkers:  the workers whose gradients the step holds (an elastic job with cluster.elastic_batch = worker).
enum class GlobalBatch { kAllWorkers, kFixedWorkers, kStepWorkers };

//   LrPolicy lr = LrPolicy::from_config(cfg);
//   LrSchedule s = lr.schedule(lr.batch_workers(num_workers, members), run_total_steps);
//   float rate = s.lr_at(step);
struct LrPolicy {
  float base_lr = 0.01f;    // optimizer.lr
  LrScheduleParams shape;   // lr_schedule.*
  int64_t batch_size = 64;  // per worker: train.batch_size (a program's loader may differ: the rule uses this one)
  GlobalBatch global_batch = GlobalBatch::kAllWorkers;
  uint32_t fixed_workers = 0;  // kFixedWorkers' count
  // train.worker_batch_sizes: the sum of the workers' batches, every step's global batch (0: workers x batch_size).
  int64_t uneven_global_batch = 0;

  static LrPolicy from_config(const Config& cfg);

  // The workers whose batches make the global batch of a step that `step_workers` of the job's `num_workers` pushed.
  uint32_t batch_workers(uint32_t num_workers, uint32_t step_workers) const;
  // The schedule of steps whose global batch is `workers` x batch_size (uneven_global_batch when set), in a run of
  // `run_total_steps` (0: not known).
  // Bad parameters are a pshard::Error (LrSchedule's), and so is a cosine schedule of unknown length (no run length
  // and no lr_schedule.total_steps).
  LrSchedule schedule(uint32_t workers, int64_t run_total_steps) const;
};

}  // namespace pshard::optim
