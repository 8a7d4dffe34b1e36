// `pshard bench compute`: forward + backward + optimizer update of one model on synthetic data, in samples/s
// (bench/compute_bench.h).
#include <cstdio>

#include "app/bench.h"
#include "bench/compute_bench.h"
#include "common/util/args.h"
#include "models/zoo/registry.h"

namespace pshard::app {
namespace {

int run_bench_compute(const std::vector<std::string>& args) {
  ArgParser p("pshard bench compute",
              "time forward + backward + optimizer update of a model on synthetic data (one process, no servers)");
  p.add_option("model", "NAME", models::join_model_names("|"), false, "mlp");
  p.add_option("batch", "N[,N...]", "samples per step (a list: one run per batch size, in order)", false, "64");
  p.add_option("threads", "T", "CPU compute threads (0: one per core)", false, "0");
  p.add_option("iters", "N", "timed steps", false, "100");
  p.add_option("warmup", "N", "untimed steps first", false, "10");
  p.add_option("hidden", "LIST", "mlp hidden sizes", false, "256,128");
  p.add_option("input", "SHAPE",
               "sample shape C,H,W or F (default per model: " + bench::describe_default_inputs() + ")");
  p.add_option("classes", "K", "classes (0: regression with one target)", false, "10");
  p.add_option("optimizer", "NAME", "update rule (optim)", false, "sgd");
  p.add_option("lr", "LR", "learning rate", false, "0.01");
  p.add_option("device", "DEV", "cpu|cuda", false, "cpu");
  p.add_option("cpu-kernels", "K",
               "cpu kernels of conv, batch norm, pooling, GEMM: onednn|reference (train.cpu_kernels)", false, "onednn");
  p.add_option("precision", "P",
               "what convolutions and GEMMs read: fp32|bf16|fp16 (train.precision; on cuda: tensor cores)", false,
               "fp32");
  p.add_option("cuda-wgrad", "W", "cuda convolution weight gradient: gemm|cudnn (train.cuda_conv_wgrad)", false,
               "gemm");
  p.add_option("seed", "S", "seed of weights and data", false, "1");
  p.add_option("fields", "N", "dlrm: categorical fields, one embedding table each (2 classes whatever --classes)",
               false, "8");
  p.add_option("table-rows", "N", "dlrm: rows of each embedding table (Zipf ids over them, as synthetic-ctr's)", false,
               "100000");
  p.add_flag("json", "print one JSON object");
  if (!p.parse(args)) return 0;

  bench::ComputeBenchOptions o;
  o.model = p.get("model");
  o.hidden = parse_int_list(p.get("hidden"), "--hidden");
  if (p.has("input")) o.input_shape = parse_int_list(p.get("input"), "--input");
  o.classes = p.get_int("classes");
  const std::vector<int64_t> batches = parse_int_list(p.get("batch"), "--batch");
  o.iters = p.get_int("iters");
  o.warmup = p.get_int("warmup");
  o.threads = p.get_int("threads");
  o.optimizer = p.get("optimizer");
  o.lr = p.get_double("lr");
  o.device = p.get("device");
  o.cpu_kernels = p.get("cpu-kernels");
  o.precision = p.get("precision");
  o.cuda_wgrad = p.get("cuda-wgrad");
  o.seed = static_cast<uint64_t>(p.get_int("seed"));
  o.fields = p.get_int("fields");
  o.table_rows = p.get_int("table-rows");
  // One run per batch size: the model and its plans are made anew each time, as a job of that batch would make them.
  for (int64_t batch : batches) {
    o.batch = batch;
    const Json result = bench::run_compute_bench(o);
    if (p.flag("json")) {
      std::printf("%s\n", result.dump().c_str());
    } else {
      std::fputs(bench::format_compute_bench(result).c_str(), stdout);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

PSHARD_BENCH(compute, "forward + backward + update of a model on synthetic data (samples/s)", run_bench_compute);

}  // namespace pshard::app
