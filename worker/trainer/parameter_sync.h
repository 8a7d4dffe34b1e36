// How a trainer's parameters are kept up to date: locally (pshard train) or
// through the parameter servers (pshard worker). The training loop is the same.
#pragma once

#include <cstdint>

namespace pshard::models {
class Model;
}

namespace pshard::trainer {

class BatchRows;

// Communication counters since the start of the run. (The time blocked on communication is counted
// by the trainer's PhaseClock: implementations wrap their waits in ScopedPhase(WorkerPhase::kCommWait).)
struct SyncStats {
  uint64_t bytes_sent = 0;       // payload bytes pushed (and init), as sent: after compression
  uint64_t bytes_recv = 0;       // payload bytes pulled, as received
  uint64_t fp32_bytes_sent = 0;  // the same payloads as float32 (cluster.compression = none)
  uint64_t fp32_bytes_recv = 0;
  uint64_t shm_bytes_sent = 0;  // payload bytes through shared memory (not in bytes_sent/recv)
  uint64_t shm_bytes_recv = 0;  // (cluster.pull_precision = fp32)
  uint32_t host = 0;            // the lowest worker rank on this worker's host (per-host figures in the metrics)
  int64_t late_steps = 0;       // steps whose gradients a server dropped: its step had closed (backup workers)
};

// The trainer calls these in this order every step:
//   begin_step(t); forward (wait_layer(l) before each layer l);
//   backward (grads_ready(first, count) as each layer's gradients are final);
//   end_step(t).
// With loss scaling (train.loss_scaling) the gradients are handed over only after backward, once unscaled:
// begin_step(t); forward; backward; finish_scaled(finite, all) ? end_step(t) : skip_step(t), and a skipped step t is
// followed by step t again.
class ParameterSync {
 public:
  virtual ~ParameterSync() = default;
  // Before step 0: make every worker start from the same weights.
  virtual void start(models::Model& model) = 0;
  virtual void begin_step(int64_t step) = 0;
  // Blocks until layer `layer` holds the weights step `step` must use.
  virtual void wait_layer(int layer) = 0;
  // Parameters [first, first + count) of the model have final gradients.
  virtual void grads_ready(int first, int count) = 0;
  virtual void end_step(int64_t step) = 0;
  // Loss scaling: this step's unscaled gradients of parameters [0, params) are final, and `finite` says whether this
  // worker's are. Hands them over (grads_ready) unless the step is skipped, and returns whether it is applied: the
  // same answer on every worker of a sync job (KvSync: the servers skip a step that any worker's push says is not
  // finite); a local or asynchronous sync answers for this worker alone.
  virtual bool finish_scaled(bool finite, int params) {
    if (finite) grads_ready(0, params);
    return finite;
  }
  // In place of end_step for a step finish_scaled() said is skipped: nothing is applied, and the model keeps its
  // weights for the next step, which has the same number.
  virtual void skip_step(int64_t step) = 0;
  // Blocks until the model holds the newest weights (before evaluation, at the end).
  virtual void sync_all() = 0;
  // Before step `step` (its data is not read yet): true when the job stopped at this step boundary
  // (checkpoint.on_sigterm), so the trainer ends here. May wait for the step's first weights, which say so.
  virtual bool stop_before(int64_t step) {
    (void)step;
    return false;
  }
  // Backup workers (cluster.backup_workers), where the servers close a step without the last pushes: before step
  // `step`, after stop_before(), the step of the weights it has begun to read (more than `step`: the job went on
  // without this worker's last pushes); after end_step(t), the step its gradients were pushed for: the lowest step
  // of the weights the step read, t when this worker is not late. The trainer skips the batches in between.
  virtual int64_t weights_step(int64_t step) { return step; }
  virtual int64_t pushed_step(int64_t step) const { return step; }
  // A late worker that reached the run's end (`step`, the run's steps): waits for the weights of that step.
  virtual void catch_up(int64_t step) {
    (void)step;
    sync_all();
  }
  // Embedding tables (models::Embedding: rows that only the servers hold; start() declares them from the model). A
  // step of such a model: pull_rows(step, rows) once its batch is read (the pulls start), wait_rows() before the
  // forward reaches the Embedding layer (rows.values(f) then hold the rows), push_rows(step, rows) after backward
  // (rows.grads(f), copied: `rows` may be reused at once). An evaluation pulls at the step its weights are of and
  // pushes nothing. The defaults are for syncs that hold no tables: an Error.
  virtual void pull_rows(int64_t step, BatchRows& rows);
  virtual void wait_rows();
  virtual void push_rows(int64_t step, const BatchRows& rows);
  // Learning rate used for step `step` (for the metrics).
  virtual double lr_at(int64_t step) const = 0;
  virtual SyncStats stats() const = 0;
};

}  // namespace pshard::trainer
