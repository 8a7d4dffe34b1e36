// Where the time went, per process: the step-time distribution of every worker (from the `step`
// lines) and the phases of every server (from the summary's `server_phases`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/metrics/metrics_reader.h"

namespace pshard::report {

// One worker of one run: its logged steps' wall times (train.log_every apart).
struct StepTimeRow {
  size_t run = 0;  // index into the runs given
  uint32_t rank = 0;
  size_t samples = 0;                      // logged steps with a step time
  double p50_s = 0, p99_s = 0, max_s = 0;  // nearest-rank percentiles of step_s
  double mean_s = 0;                       // mean of step_s
  WorkerPhaseSeconds mean_phases;          // mean of each phase over the same steps
};

// A row per (run, worker) with at least one logged step time, in run then rank order.
//
//   for (const StepTimeRow& r : step_time_rows(runs)) printf("worker %u p99 %g s\n", r.rank, r.p99_s);
std::vector<StepTimeRow> step_time_rows(const std::vector<RunMetrics>& runs);

// The nearest-rank percentile (0 < p <= 100) of `values` (sorted in place); NaN when empty.
double percentile(std::vector<double>& values, double p);

// report.md's tables.
std::string step_times_markdown(const std::vector<StepTimeRow>& rows, const std::vector<RunMetrics>& runs,
                                const std::vector<std::string>& labels);
// Empty when no run recorded server phases.
std::string server_phases_markdown(const std::vector<RunMetrics>& runs, const std::vector<std::string>& labels);

}  // namespace pshard::report
