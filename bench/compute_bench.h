// `pshard bench compute`: forward + backward + optimizer update of one model on synthetic data, in samples/s.
//
//   ComputeBenchOptions o;
//   o.model = "lenet"; o.iters = 5;
//   Json result = run_compute_bench(o);  // {"bench":"compute","model":"lenet",...,"samples_per_s":9568,...}
//   std::fputs(format_compute_bench(result).c_str(), stdout);
//
// One process, no servers: the model comes from the zoo (models/zoo/registry.h), the update from the shared
// optimizer library (optim), run on the host as a server's would be. docs/PERFORMANCE.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/util/json.h"

namespace pshard::bench {

struct ComputeBenchOptions {
  std::string model = "mlp";              // a model.name of the zoo
  int64_t batch = 64;                     // samples per step, >= 1
  int64_t threads = 0;                    // CPU compute threads (0: one per core)
  int64_t iters = 100;                    // timed steps, >= 1
  int64_t warmup = 10;                    // untimed steps first, >= 0
  std::vector<int64_t> hidden{256, 128};  // mlp hidden sizes
  std::vector<int64_t> input_shape;       // sample shape C,H,W or F (empty: the model's example input)
  int64_t classes = 10;                   // classes (0: regression with one target)
  std::string optimizer = "sgd";          // update rule (optim)
  double lr = 0.01;                       // learning rate
  std::string device = "cpu";             // cpu|cuda
  std::string cpu_kernels = "onednn";     // cpu: onednn|reference (train.cpu_kernels)
  std::string precision = "fp32";         // cpu: fp32|bf16 (train.precision)
  std::string cuda_wgrad = "gemm";        // cuda: gemm|cudnn (train.cuda_conv_wgrad)
  uint64_t seed = 1;                      // seed of weights and data
  // A model with embedding tables (dlrm): categorical fields (one table each, updated by `optimizer` as pshard train
  // updates them) and rows per table; its batch is synthetic-ctr's (Zipf ids), of 2 classes whatever `classes` says.
  int64_t fields = 8;
  int64_t table_rows = 100000;
};

// Builds the model on the device, runs `warmup` untimed and `iters` timed steps on one fixed synthetic batch
// and returns one JSON object: bench ("compute"), model, batch, threads, device (the backend's description),
// iters, params, samples_per_s, step_ms, forward_ms, backward_ms, update_ms, cpu_ms_per_step (process CPU
// time per step, all threads), peak_rss_mib (the process's peak resident memory), optimizer, last_loss; with
// embedding tables also tables, table_rows and distinct_rows (the batch's distinct ids over all tables): the
// forward then includes finding the distinct ids and reading their rows, the backward summing each row's
// gradient, the update the rows' too. Throws pshard::Error for bad options.
Json run_compute_bench(const ComputeBenchOptions& options);

// The text report of a run_compute_bench result, as `pshard bench compute` prints it without --json:
//   bench compute: lenet (431080 parameters), batch 64, cpu (oneDNN, 2 threads), 5 steps
//     9568 samples/s   6.689 ms/step (forward 2.064, backward 4.562, sgd update 0.061; cpu 13.088 ms)   loss 2.2785
//     (continued on the same line:)   peak RSS 31 MiB
std::string format_compute_bench(const Json& result);

// Each model's default sample shape, for --help: "1,28,28 for linreg, softmax, mlp, lenet; 3,32,32 for resnet20".
std::string describe_default_inputs();

}  // namespace pshard::bench
