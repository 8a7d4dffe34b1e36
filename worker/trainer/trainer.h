// The training loop shared by `pshard train` (local) and `pshard worker`
// (through the parameter servers): one step fits on a screen.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>

#include "common/control/cluster_map.h"
#include "common/metrics/epoch_report.h"
#include "common/metrics/phases.h"
#include "common/util/json.h"
#include "worker/data/dataset.h"
#include "worker/trainer/loss_scaler.h"
#include "worker/trainer/parameter_sync.h"

namespace pshard {
class Config;
class Tracer;
}  // namespace pshard
namespace pshard::models {
class Model;
}

namespace pshard::trainer {

class BatchRows;

// Batches [first, first + count) of an epoch, granted to this worker (cluster.batch_assignment = dynamic); count 0:
// the epoch's batches are all taken.
struct ClaimedBatches {
  int64_t first = 0;
  int64_t count = 0;
};

struct TrainerOptions {
  int64_t epochs = 1;
  int64_t batch_size = 64;  // per worker
  int64_t log_every = 50;   // steps between `step` events
  bool eval = true;
  uint32_t rank = 0;   // this worker
  uint32_t world = 1;  // number of workers
  // train.worker_batch_sizes: every worker's batch, one entry a rank (batch_size is this rank's); empty: every
  // worker's is batch_size. A step's global batch is their sum, and this worker's gradients are weighted by
  // world x batch_size / that sum (gradient_weight) so that the servers' plain mean of the pushes is the mean over
  // every sample of the step.
  std::vector<int64_t> worker_batches;
  uint64_t seed = 1;
  int prefetch = 2;
  // > 0: replace forward/backward by sleeps of 1/3 and 2/3 of this (communication studies)
  double simulate_compute_ms = 0;
  // train.straggler_factor for the worker train.straggler_rank names, else 1: its steps take this many times as long
  // (an emulated straggler, for backup-worker studies).
  double slowdown = 1;
  bool backup_workers = false;  // cluster.backup_workers > 0: the epoch reports count late steps
  // Resume: the first global step to run. The data position follows from it (epoch = step /
  // steps_per_epoch + 1 with that epoch's seeded shuffle, the first step % steps_per_epoch batches
  // skipped), so a resumed sync run sees the same batches as an uninterrupted one.
  int64_t start_step = 0;

  // Elastic jobs (cluster.min_workers > 0): who trains each epoch is decided at its start. `plan_epoch(epoch, step)`
  // waits for the plan of `epoch`, which starts at global step `step` (nullopt: the job ended before it began). This
  // worker trains shard i of the plan's n members (i: its place among them) in (train size / (n x batch)) steps.
  // Empty: every epoch trains with the `world` workers, shard `rank`.
  std::function<std::optional<EpochPlan>(int64_t epoch, int64_t step)> plan_epoch;
  // A worker that joins the running job: the plan of its first epoch (start_step is its first step), and what it
  // calls once its first pulls (joins) were answered, when the servers count it in every step from there on.
  std::optional<EpochPlan> joining;
  std::function<void(int64_t epoch)> joined;
  // cluster.elastic_batch = global: the global batch every epoch's members share, each training this / members
  // (rounded down) samples a step; 0: each member's batch is batch_size.
  int64_t elastic_global_batch = 0;
  // Each plan as the epoch starts, with its steps and this worker's batch (to log it, to follow its global batch).
  std::function<void(const EpochPlan&, int64_t steps, int64_t batch)> on_plan;
  // cluster.batch_assignment = dynamic (async jobs): an epoch's batches are the batch-sized pieces of its shuffled
  // samples (one permutation for every worker, floor(train size / batch) of them), and this worker trains those that
  // `claim_batches(epoch, batches, count)` grants it, a few at a time as it goes, until none are left: a faster
  // worker trains more of them, and its step count runs ahead of the others'. Empty: the static shard `rank`.
  std::function<ClaimedBatches(int64_t epoch, int64_t batches, uint32_t count)> claim_batches;
  // train.loss_scaling: the loss scale backward starts from, and its rule. A skipped step (some worker's gradients
  // not finite) consumes its batch but not a step of the servers: the sync's step number lags the data's by the steps
  // skipped so far, the same on every worker.
  LossScaler loss_scaler;
  // A resumed run with loss scaling: the data steps the run skipped before (its step lines; skipped_steps_in()).
  // The scaler is replayed to start_step from them, so the scale, its clean steps and the data position (start_step
  // plus the steps skipped before it) are the uninterrupted run's. nullopt: not known (a fresh scaler at start_step).
  std::optional<std::set<int64_t>> skipped_before;

  // The samples of one step over every worker.
  int64_t global_batch() const;
  // What backward multiplies this worker's gradients by: 1 with equal batches.
  double gradient_weight() const;

  // Throws an Error when train.worker_batch_sizes does not hold one entry for each of the `world` workers.
  static TrainerOptions from_config(const Config& cfg, uint32_t rank, uint32_t world);
};

// A `step` event (docs/METRICS.md).
struct StepEvent {
  uint32_t rank = 0;
  int64_t epoch = 0, step = 0;
  double loss = 0, lr = 0, wall_s = 0;
  double step_s = 0;          // this step's wall time
  WorkerPhaseSeconds phases;  // where step_s went; adds up to it
  double loss_scale = 0;      // loss scaling: the scale of this step (0: no loss scaling; absent from the JSON)
  bool skipped = false;       // loss scaling: the step was skipped (some worker's gradients were not finite)

  // The `step` line of metrics.jsonl (docs/METRICS.md).
  Json to_json() const;
};

// Runs epochs of: next batch -> forward -> backward -> update, then an
// evaluation of this worker's shard of the test set. The loop's time is
// measured by phase (WorkerPhase: data, forward, backward, communication
// wait, other) into each epoch report and step event.
//
//   Trainer t(TrainerOptions::from_config(cfg, 0, 1), *model, data, sync);
//   t.run([](const StepEvent& s) { ... }, [](const WorkerEpochReport& r) { ... });
class Trainer {
 public:
  Trainer(const TrainerOptions& options, models::Model& model, const data::DataSplits& data, ParameterSync& sync);
  ~Trainer();

  // Identical on every worker: floor(train size / (world x batch)).
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t total_steps() const { return steps_per_epoch_ * options_.epochs; }

  void run(const std::function<void(const StepEvent&)>& on_step,
           const std::function<void(const WorkerEpochReport&)>& on_epoch);

  // trace.steps: the steps of `tracer`'s window become spans (phases on row 1, each layer's forward
  // and backward on row 2). nullptr: no trace.
  void set_tracer(Tracer* tracer) { tracer_ = tracer; }
  // After run(): the step boundary at which the job stopped (ParameterSync::stop_before), or -1 when it ran to its
  // end.
  int64_t stopped_at() const { return stopped_at_; }

 private:
  struct Loop;  // what one run() keeps between its steps (trainer.cc)
  // One step of the loop: its batch, forward and backward, the loss-scaling vote, the push, its step line. False when
  // the job stops at this step's boundary instead (checkpoint.on_sigterm).
  bool train_step(Loop& loop, int64_t epoch, int64_t step, WorkerEpochReport& report);
  // cluster.batch_assignment = dynamic: the batches of `epoch` this worker claims, from global step `*step` on (each
  // trained batch advances it), until none are left or the job stops at a step's boundary (train_step).
  void train_claimed(Loop& loop, int64_t epoch, int64_t* step, WorkerEpochReport& report);
  // The end of an epoch: its phases and steps, the loss scale, the evaluation, the report.
  void end_epoch_report(Loop& loop, WorkerEpochReport& report, int64_t first_step, int64_t step,
                        int64_t skipped_before);
  // Evaluates this worker's shard of the test set with the weights of step `step`. Click data: also the shard's AUC
  // and log loss (figures test_auc, test_logloss) and, for synthetic clicks, the AUC of the generator's own
  // probabilities on the same samples (test_auc_bound).
  void evaluate(WorkerEpochReport* report, int64_t step);
  // Elastic jobs: the plan of `epoch` (starting at `step`), or nullopt when the job ended before it.
  std::optional<EpochPlan> plan(int64_t epoch, int64_t step, bool first);

  TrainerOptions options_;
  models::Model& model_;
  const data::DataSplits& data_;
  ParameterSync& sync_;
  int64_t steps_per_epoch_ = 0;
  int64_t stopped_at_ = -1;
  bool ended_late_ = false;  // backup workers: the servers reached the run's end while this worker was late
  int shard_ = 0;            // this worker's shard of the epoch's data (elastic jobs: its place among the members)
  int shards_ = 1;           // how many shards the epoch's data is cut into
  int64_t batch_ = 0;        // this worker's batch in the epoch (elastic jobs: it may change with the members)
  Tracer* tracer_ = nullptr;
  std::unique_ptr<BatchRows> rows_;  // a model with embedding tables: the rows of the batch at hand
};

// steps per epoch for a data set of n samples: floor(n / (world x batch)); an
// Error when that is 0 (too little data for one global batch).
int64_t steps_per_epoch_for(int64_t n, uint32_t world, int64_t batch_size);
// The same for a fixed job's options: floor(n / global_batch()).
int64_t steps_per_epoch_for(int64_t n, const TrainerOptions& options);

}  // namespace pshard::trainer
