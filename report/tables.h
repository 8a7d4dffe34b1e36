// The numbers of a report: run labels, the scaling table and the batch-size table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics/metrics_reader.h"

namespace pshard::report {

// One label per run naming what differs between the runs' configs
// ("optimizer.lr=0.1, train.batch_size=64"), plus "W=4" when the worker
// counts differ; run.name is ignored. Runs whose configs are all equal are
// labelled by their directory name; duplicate labels get the name appended.
//
//   std::vector<std::string> labels = run_labels(runs);  // {"optimizer.lr=0.01", "optimizer.lr=0.1"}
std::vector<std::string> run_labels(const std::vector<RunMetrics>& runs);

// The config keys (besides run.name) whose values differ between runs, sorted.
std::vector<std::string> differing_keys(const std::vector<RunMetrics>& runs);

// Whether any epoch of any run recorded `field` (a figure the runs did not measure gets no column or chart).
bool any_value(const std::vector<RunMetrics>& runs, std::optional<double> EpochRecord::*field);

// One run of a scaling study. Times in seconds, traffic in bytes, bandwidth in
// bytes per second; NaN where the run did not record the input.
struct ScalingRow {
  size_t run = 0;  // index into the runs given
  int64_t workers = 0, servers = 0;
  int64_t epochs = 0, steps = 0;  // steps: synchronous steps of each worker (last epoch line's `step`)
  double train_s = 0;             // sum of epoch_s over epochs (training only)
  double epoch_s = 0;             // train_s / epochs
  double speedup = 0;             // epoch_s(baseline) / epoch_s; baseline = fewest workers in the group
  double efficiency = 0;          // speedup * workers(baseline) / workers
  double samples_per_s = 0;       // training samples per second, all workers
  double step_s = 0;              // train_s / steps
  // Measured phases (mean over workers) summed over epochs / steps: data, forward, backward,
  // comm_wait, other; they add up to step_s up to the slowest worker's lead (epoch_s is the slowest's).
  WorkerPhaseSeconds phases_per_step;
  double model_bytes = 0;                       // bytes of all parameters (summary)
  double traffic_bytes_per_step = 0;            // (bytes_sent + bytes_recv) of all workers / steps
  double fp32_traffic_bytes_per_step = 0;       // the same payloads as float32 (fp32_bytes_sent + fp32_bytes_recv)
  double traffic_vs_fp32 = 0;                   // traffic / fp32 traffic: what compression left (1 = none)
  double ps_bound_bytes_per_step = 0;           // 2 * model_bytes * workers
  double sent_bytes_per_worker_step = 0;        // bytes_sent / workers / steps
  double ring_bytes_per_worker_step = 0;        // 2 * (workers - 1) / workers * model_bytes
  double bandwidth_bytes_per_s = 0;             // (bytes_sent + bytes_recv) of all workers / train_s
  double bandwidth_per_worker_bytes_per_s = 0;  // bandwidth_bytes_per_s / workers
  double host_network_bytes_per_step = 0;       // the busiest host's bytes through sockets per step (NaN: unknown)
  double host_shm_bytes_per_step = 0;           // and through shared memory
};

// A set of runs that differ only in the worker count (and run.name / servers).
struct ScalingGroup {
  std::string title;             // what the runs share that other groups do not ("optimizer.lr=0.1"), or "all runs"
  std::vector<ScalingRow> rows;  // sorted by workers
};

// Groups finished runs with epoch lines by their config (ignoring run.name)
// and returns every group with at least two different worker counts.
//
//   for (const ScalingGroup& g : scaling_groups(runs)) print(g.rows[i].speedup);
std::vector<ScalingGroup> scaling_groups(const std::vector<RunMetrics>& runs);

// Computes one row from a run (speedup/efficiency left 0; scaling_groups fills them).
ScalingRow scaling_row(const RunMetrics& run, size_t index);

// Throughput of runs that differ in batch size.
struct BatchRow {
  size_t run = 0;
  int64_t workers = 0, batch_size = 0, global_batch = 0;
  double samples_per_s = 0;                            // summary (all workers)
  double step_s = 0;                                   // training seconds per step
  double train_loss = 0, test_loss = 0, test_acc = 0;  // last epoch; NaN when not recorded
};

// Rows for every finished run when at least two batch sizes (global batch)
// occur among them, sorted by workers then global batch; empty otherwise.
std::vector<BatchRow> batch_rows(const std::vector<RunMetrics>& runs);

}  // namespace pshard::report
