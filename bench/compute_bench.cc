// `pshard bench compute`: the timed steps and the text report (bench/compute_bench.h).
#include "bench/compute_bench.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "bench/text.h"
#include "common/error.h"
#include "models/backend.h"
#include "models/layers/embedding.h"
#include "models/model.h"
#include "models/zoo/registry.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "worker/data/synthetic_ctr.h"
#include "worker/trainer/batch_rows.h"
#include "worker/trainer/local_sync.h"

namespace pshard::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// CPU time of the whole process (all threads), seconds: on a shared machine, cpu_ms / step with one thread is a
// load-independent measure of the work a step takes.
double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Peak resident memory of this process so far, MiB: VmHWM of /proc/self/status (0 where there is none). Not
// getrusage's ru_maxrss, which keeps the peak of the process image before exec (a Python parent's, for instance).
double peak_rss_mib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;  // kB
  }
  return 0.0;
}

}  // namespace

std::string describe_default_inputs() {
  std::vector<std::pair<std::string, std::string>> groups;  // shape -> models, in table order
  for (const models::ModelInfo& m : models::registered_models()) {
    std::string shape;
    for (int64_t d : m.example_input) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& e) { return e.first == shape; });
    if (g == groups.end()) {
      groups.push_back({shape, m.name});
    } else {
      g->second += std::string(", ") + m.name;
    }
  }
  std::string text;
  for (const auto& [shape, names] : groups) text += (text.empty() ? "" : "; ") + shape + " for " + names;
  return text;
}

Json run_compute_bench(const ComputeBenchOptions& options) {
  models::ModelSpec spec;
  spec.name = options.model;
  spec.hidden = options.hidden;
  spec.input_shape = options.input_shape.empty() ? models::model_info(spec.name).example_input : options.input_shape;
  spec.num_classes = options.classes;
  spec.target_dim = 1;
  const bool tables = models::model_info(spec.name).embedding_tables;
  if (tables) {
    if (options.fields < 1 || options.table_rows < 1) {
      throw Error("bench compute: --fields and --table-rows must be >= 1");
    }
    spec.num_classes = 2;  // a click model
    spec.table_rows.assign(static_cast<size_t>(options.fields), static_cast<uint64_t>(options.table_rows));
  }
  const int64_t batch = options.batch, iters = options.iters, warmup = options.warmup;
  const int64_t threads = options.threads;
  if (batch < 1 || iters < 1 || warmup < 0 || threads < 0) {
    throw Error("bench compute: --batch and --iters must be >= 1, --warmup and --threads >= 0");
  }
  const models::CudaConvWgrad wgrad = models::cuda_conv_wgrad_from_name(options.cuda_wgrad);  // checked on cpu too
  const models::Precision precision = models::precision_from_name(options.precision);
  std::unique_ptr<models::Backend> backend;
  if (options.device == "cpu") {
    backend = models::make_cpu_backend(static_cast<int>(threads), models::cpu_kernels_from_name(options.cpu_kernels),
                                       precision);
  } else if (options.device == "cuda") {
    backend = models::make_cuda_backend(0, /*allow_tf32=*/false, wgrad, models::kCudaWgradWorkspaceBytes, precision);
  } else {
    throw Error("bench compute: --device must be cpu or cuda, got '" + options.device + "'");
  }
  auto model = models::Model::create(spec, *backend);
  const uint64_t seed = options.seed;
  model->init_params(seed);

  optim::OptimizerParams op;
  op.name = options.optimizer;
  op.lr = static_cast<float>(options.lr);
  // The update is `pshard train`'s: the optimizer on the host, on CUDA through pinned buffers (gradients down on the
  // side stream, weights up while the next parameter is updated).
  trainer::LocalSync update(op, optim::LrScheduleParams{}, batch, warmup + iters);
  trainer::TableSettings table_settings;
  table_settings.seed = seed;
  if (tables) update.set_tables(op, table_settings);
  update.start(*model);

  // Synthetic batch (fixed: the data path is not what this measures).
  const int64_t sample = models::shape_numel(spec.input_shape);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(batch * sample)), targets(static_cast<size_t>(batch));
  for (float& v : x) v = normal(rng);
  for (float& v : targets) v = normal(rng);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (size_t i = 0; i < labels.size(); ++i)
    labels[i] = spec.num_classes > 0 ? static_cast<int32_t>(i % spec.num_classes) : 0;
  // Click data: synthetic-ctr's samples (dense features, Zipf ids per field, labels), and the batch's rows.
  std::vector<uint64_t> ids;
  std::unique_ptr<trainer::BatchRows> rows;
  int64_t distinct_rows = 0;
  if (tables) {
    data::SyntheticCtrOptions c;
    c.samples = batch;
    c.seed = seed;
    c.num_fields = options.fields;
    c.cardinality = static_cast<uint64_t>(options.table_rows);
    c.num_dense = sample;
    const data::CtrDataset clicks = data::make_synthetic_ctr(c);
    x = clicks.dense;
    ids = clicks.ids;
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = clicks.labels[i] > 0.5f ? 1 : 0;
    rows = std::make_unique<trainer::BatchRows>(options.fields, model->embedding()->dim());
    rows->prepare(ids.data(), batch);
    for (int64_t f = 0; f < options.fields; ++f) distinct_rows += static_cast<int64_t>(rows->ids(f).size());
  }

  double fwd_ms = 0, bwd_ms = 0, upd_ms = 0, loss = 0;
  int64_t t = 0;
  auto step = [&](bool timed) {
    auto t0 = Clock::now();
    if (rows) {  // as a worker's step: the distinct ids, their rows, each sample's rows into the Embedding layer
      rows->prepare(ids.data(), batch);
      update.pull_rows(t, *rows);
      rows->gather(model->embedding()->rows(batch));
    }
    models::StepResult r = model->forward(x.data(), batch, spec.num_classes > 0 ? labels.data() : nullptr,
                                          spec.num_classes > 0 ? nullptr : targets.data(), true);
    auto t1 = Clock::now();
    model->backward();
    backend->synchronize();
    if (rows) rows->scatter(model->embedding()->row_grads());
    auto t2 = Clock::now();
    if (rows) update.push_rows(t, *rows);
    update.end_step(t++);
    backend->synchronize();
    if (timed) {
      fwd_ms += std::chrono::duration<double, std::milli>(t1 - t0).count();
      bwd_ms += std::chrono::duration<double, std::milli>(t2 - t1).count();
      upd_ms += ms_since(t2);
      loss = r.loss_sum / r.n;
    }
  };
  for (int64_t i = 0; i < warmup; ++i) step(false);
  auto start = Clock::now();
  const double cpu0 = process_cpu_s();
  for (int64_t i = 0; i < iters; ++i) step(true);
  const double total_ms = ms_since(start);
  const double cpu_ms = (process_cpu_s() - cpu0) * 1000.0 / static_cast<double>(iters);
  const double samples_per_s = static_cast<double>(batch * iters) / (total_ms / 1000.0);

  Json j = Json::object();
  j.set("bench", "compute")
      .set("model", spec.name)
      .set("batch", batch)
      .set("threads", backend->threads())
      .set("device", backend->describe())
      .set("iters", iters)
      .set("params", model->num_params_elems())
      .set("samples_per_s", samples_per_s)
      .set("step_ms", total_ms / iters)
      .set("forward_ms", fwd_ms / iters)
      .set("backward_ms", bwd_ms / iters)
      .set("update_ms", upd_ms / iters)
      .set("cpu_ms_per_step", cpu_ms)
      .set("peak_rss_mib", peak_rss_mib())
      .set("optimizer", op.name)
      .set("last_loss", loss);
  if (tables) j.set("tables", options.fields).set("table_rows", options.table_rows).set("distinct_rows", distinct_rows);
  return j;
}

std::string format_compute_bench(const Json& r) {
  std::string text;
  std::string tables;
  if (r.has("tables")) {
    appendf(tables, ", %lld tables x %lld rows (%lld distinct rows a batch)",
            static_cast<long long>(r.at("tables").as_int()), static_cast<long long>(r.at("table_rows").as_int()),
            static_cast<long long>(r.at("distinct_rows").as_int()));
  }
  appendf(text, "bench compute: %s (%lld parameters%s), batch %lld, %s, %lld steps\n",
          r.at("model").as_string().c_str(), static_cast<long long>(r.at("params").as_int()), tables.c_str(),
          static_cast<long long>(r.at("batch").as_int()), r.at("device").as_string().c_str(),
          static_cast<long long>(r.at("iters").as_int()));
  appendf(text,
          "  %.0f samples/s   %.3f ms/step (forward %.3f, backward %.3f, %s update %.3f; cpu %.3f ms)   loss %.4f   "
          "peak RSS %.0f MiB\n",
          r.at("samples_per_s").as_number(), r.at("step_ms").as_number(), r.at("forward_ms").as_number(),
          r.at("backward_ms").as_number(), r.at("optimizer").as_string().c_str(), r.at("update_ms").as_number(),
          r.at("cpu_ms_per_step").as_number(), r.at("last_loss").as_number(), r.at("peak_rss_mib").as_number());
  return text;
}

}  // namespace pshard::bench
