// Reads a run directory (config.toml + metrics.jsonl, docs/METRICS.md) back into structs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics/phases.h"

namespace pshard {

// One `step` line: the loss and the phase times of one batch of one worker.
struct StepRecord {
  uint32_t rank = 0;  // the worker (lines without a rank: worker 0)
  int64_t epoch = 0;
  int64_t step = 0;
  double loss = 0;
  std::optional<double> lr;
  double wall_s = 0;
  std::optional<double> step_s;              // the step's wall time
  std::optional<WorkerPhaseSeconds> phases;  // where step_s went
};

// One `epoch` line. Fields that are null or absent are empty optionals.
struct EpochRecord {
  int64_t epoch = 0;
  int64_t step = 0;  // global steps done after this epoch
  std::optional<double> train_loss, train_acc, test_loss, test_acc;
  std::optional<double> samples_per_s, epoch_s, eval_s;
  std::optional<WorkerPhaseSeconds> phases;  // mean over workers
  std::optional<double> bytes_sent, bytes_recv, wall_s;
  std::optional<double> fp32_bytes_sent, fp32_bytes_recv;  // absent in runs recorded before compression existed
  std::optional<double> gpu_util_pct, gpu_mem_peak_bytes;  // only where a worker sampled its GPU through NVML
  std::optional<double> loss_scale, skipped_steps;         // only where the workers scaled the loss
  std::map<std::string, double> figures;                   // a program's own (ps.report(figures=...)), by name
};

// One server's `server_phases` entry of the summary.
struct ServerPhasesRecord {
  uint32_t rank = 0;
  int64_t threads = 0;
  double wall_s = 0;
  ServerPhaseSeconds phases;  // summed over its threads: adds up to threads x wall_s
};

// The last line (`summary`), when the run finished.
struct SummaryRecord {
  std::optional<double> test_acc, test_loss, train_loss, train_acc;
  std::optional<double> samples_per_s, wall_s, lr, bytes_sent, bytes_recv;
  std::optional<double> gpu_util_pct, gpu_mem_peak_bytes;  // only where a worker sampled its GPU through NVML
  std::optional<double> loss_scale, skipped_steps;         // only where the workers scaled the loss
  std::map<std::string, double> figures;                   // the last epoch's own figures of the program, by name
  // The busiest host's payload bytes per step, through sockets and through shared memory (absent in runs recorded
  // before hosts were counted).
  std::optional<double> network_bytes_per_host_step, shm_bytes_per_host_step;
  std::optional<WorkerPhaseSeconds> phases;  // totals over the run, mean over workers
  std::vector<ServerPhasesRecord> servers_phases;
  int64_t epochs = 0, steps = 0;
  int64_t batch_size = 0, global_batch = 0, model_bytes = 0;
  int64_t workers = 1, servers = 0;
  std::string model, optimizer, mode;
};

// Everything a report needs about one run.
struct RunMetrics {
  std::string dir;                            // as given
  std::string name;                           // last path component of dir
  std::map<std::string, std::string> config;  // "section.key" -> value text (strings unquoted), from config.toml
  std::vector<StepRecord> steps;
  std::vector<EpochRecord> epochs;
  std::optional<SummaryRecord> summary;  // empty: the run did not finish (or was aborted)
  std::string aborted;                   // why, when the summary says the job was aborted (its `aborted` field)
  // Non-empty when the last line of metrics.jsonl is not JSON (torn by a failed write): what to tell
  // the user, naming the file and line; that line was skipped.
  std::string torn_last_line;
};

// Reads DIR/metrics.jsonl (required) and DIR/config.toml (optional: empty
// config when absent). A malformed line is an Error naming the file and the
// line ("runs/a/metrics.jsonl:7: field 'loss': expected a number"), except a
// last line that is not JSON and has no newline: a write cut short (a full
// disk), skipped and described in `torn_last_line`. Unknown
// events and unknown fields are ignored, so newer writers stay readable.
//
//   RunMetrics run = read_run("runs/mlp-sgd");
//   for (const EpochRecord& e : run.epochs) std::printf("%lld %g\n", (long long)e.epoch, *e.test_acc);
RunMetrics read_run(const std::string& dir);

// True when DIR/metrics.jsonl exists.
bool is_run_dir(const std::string& dir);

}  // namespace pshard
