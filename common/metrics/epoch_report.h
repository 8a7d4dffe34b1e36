// What one worker measured in one epoch, and how the reports of all workers
// combine into the `epoch` and `summary` events of docs/METRICS.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/metrics/gpu_sampler.h"
#include "common/metrics/phases.h"
#include "common/util/json.h"

namespace pshard {

// Raw sums of one worker's epoch; combined exactly (sums, not means of means).
struct WorkerEpochReport {
  uint32_t rank = 0;
  int64_t epoch = 0;  // 1-based: the epoch's place in the run, by which the workers' reports are combined
  // The epoch's number as the program counts it (any increasing integers; none: = epoch, as for pshard's own
  // workers), recorded as the epoch line's "epoch".
  std::optional<int64_t> label;
  int64_t number() const { return label.value_or(epoch); }
  int64_t step = 0;            // global steps done after this epoch
  int64_t steps = 0;           // steps this worker took in the epoch
  uint32_t host = 0;           // the lowest worker rank on this worker's host: names the host in per-host figures
  int64_t samples = 0;         // training samples this worker processed
  bool has_train_loss = true;  // loss_sum was measured
  double loss_sum = 0;         // sum of per-sample training losses (may be NaN or infinite: a diverged run)
  bool has_train_acc = true;   // correct was measured (a classification task)
  int64_t correct = 0;         // training argmax hits
  bool evaluated = false;      // test_n is valid, and the test figures below that are marked measured
  int64_t test_n = 0;          // test samples this worker evaluated (its shard)
  bool has_test_loss = true;   // test_loss_sum was measured
  double test_loss_sum = 0;
  // loss_sum and test_loss_sum hold per-sample means, not sums: a program's report (pshard_epoch_report's
  // PSHARD_LOSS_MEANS), whose huge mean would overflow as a sum; the combined means are the same either way.
  bool loss_means = false;
  bool has_test_acc = true;  // test_correct was measured
  int64_t test_correct = 0;
  double epoch_s = 0;  // wall time of the training part of the epoch
  double eval_s = 0;
  WorkerPhaseSeconds phases;  // where epoch_s went; adds up to it
  uint64_t bytes_sent = 0;    // payload bytes as they went on the wire (after compression)
  uint64_t bytes_recv = 0;
  uint64_t fp32_bytes_sent = 0;  // the same payloads as float32 (what no compression would have moved)
  uint64_t fp32_bytes_recv = 0;
  uint64_t shm_bytes_sent = 0;  // payload bytes through shared memory (cluster.transport), not in bytes_sent/recv
  uint64_t shm_bytes_recv = 0;
  double wall_s = 0;  // since the start of training, at the end of the epoch
  double lr = 0;      // learning rate of the last step of the epoch
  // The worker's GPU as NVML sampled it over the epoch (GpuSampler); has_gpu false (the fields absent from the JSON)
  // where no NVML answered: a CPU worker, or no driver.
  bool has_gpu = false;
  double gpu_util_pct = 0;          // mean utilisation, percent
  uint64_t gpu_mem_peak_bytes = 0;  // highest memory use of the GPU
  // Loss scaling (train.loss_scaling): has_loss_scale false (the fields absent from the JSON) when it is off.
  bool has_loss_scale = false;
  double loss_scale = 0;      // the scale at the end of the epoch
  int64_t skipped_steps = 0;  // steps of the epoch skipped since some worker's gradients were not finite
  // Backup workers (cluster.backup_workers): has_late false (the fields absent from the JSON) when they are off.
  bool has_late = false;
  int64_t late_steps = 0;       // steps whose gradients the servers dropped: they came after the step had closed
  int64_t caught_up_steps = 0;  // batches this worker skipped to catch up with the servers' step
  // A program's own figures of the epoch by name (pshard_report_figure: "test_auc", "test_logloss"): the epoch
  // line's `figures` holds each one's mean over the workers that reported it, weighted by their test_n when they
  // evaluated, else by their samples. Names: valid_figure_name().
  std::map<std::string, double> figures;
  static constexpr size_t kMaxFigures = 16;

  // Fills the gpu fields from what `sampler` gathered since its last take (nothing when it is null or has nothing).
  void take_gpu_usage(GpuSampler* sampler);

  Json to_json() const;
  // Strict: a missing or mistyped field is a pshard::Error naming it.
  static WorkerEpochReport from_json(const Json& j);
};

// A name a program may give its own figure: 1-64 characters of [A-Za-z0-9_], starting with a letter.
bool valid_figure_name(const std::string& name);

// The `epoch` event of docs/METRICS.md from the reports of every worker for
// the same epoch (any order). Its `hosts` list sums the payload bytes of the workers of each host (network and
// shared memory apart), and network_bytes_per_host_step / shm_bytes_per_host_step are the busiest host's per step. Each
// figure combines the workers that measured it (null when none did); a non-finite one makes the combined figure
// non-finite. gpu_util_pct (mean over the workers that sampled a GPU) and gpu_mem_peak_bytes (the highest of theirs)
// are there only when some worker sampled one; loss_scale and skipped_steps (the highest of the workers': in a sync job
// they agree) only when the workers scale the loss; `figures` only when some worker named one.
Json combine_epoch(std::vector<WorkerEpochReport> reports);

// Backup workers: a worker whose gradients were dropped in more than this share of an epoch's steps is a straggler,
// named in the epoch event (`stragglers`) and its terminal line.
constexpr double kStragglerShare = 0.1;

// Totals over the run, fed with every combined `epoch` event; summary()
// returns the `summary` event, to which the caller adds what was trained
// (model, optimizer, workers, servers, mode...).
class RunTotals {
 public:
  void add_epoch(const Json& epoch_event);
  Json summary(double wall_s) const;

 private:
  Json last_ = Json::object();
  int64_t epochs_ = 0;
  double samples_ = 0, train_s_ = 0;
  WorkerPhaseSeconds phases_;
  double bytes_sent_ = 0, bytes_recv_ = 0, fp32_bytes_sent_ = 0, fp32_bytes_recv_ = 0;
  double shm_bytes_sent_ = 0, shm_bytes_recv_ = 0;
  double steps_ = 0;                                          // steps taken over the epochs
  std::map<uint32_t, std::pair<double, double>> host_bytes_;  // per host (its lowest rank): network, shared memory
  double gpu_util_weighted_ = 0, gpu_util_s_ = 0;  // utilisation weighted by epoch_s, over the epochs that have it
  double gpu_mem_peak_ = 0;
  bool has_gpu_ = false;
  bool has_loss_scale_ = false;
  double skipped_steps_ = 0;
  bool has_late_ = false;
  double late_steps_ = 0;
};

}  // namespace pshard
