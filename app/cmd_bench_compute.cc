// `pshard bench compute`: forward + backward + optimizer update of one model on synthetic data, in samples/s.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "app/bench.h"
#include "common/error.h"
#include "common/util/args.h"
#include "common/util/json.h"
#include "models/backend.h"
#include "models/model.h"
#include "models/zoo/registry.h"
#include "server/optimizers/optimizer.h"

namespace pshard::app {
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

// "1,28,28 for linreg, softmax, mlp, lenet; 3,32,32 for resnet20": each model's example input, for --help.
std::string example_inputs() {
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

int run_bench_compute(const std::vector<std::string>& args) {
  ArgParser p("pshard bench compute",
              "time forward + backward + optimizer update of a model on synthetic data (one process, no servers)");
  p.add_option("model", "NAME", models::join_model_names("|"), false, "mlp");
  p.add_option("batch", "N", "samples per step", false, "64");
  p.add_option("threads", "T", "CPU compute threads (0: one per core)", false, "0");
  p.add_option("iters", "N", "timed steps", false, "100");
  p.add_option("warmup", "N", "untimed steps first", false, "10");
  p.add_option("hidden", "LIST", "mlp hidden sizes", false, "256,128");
  p.add_option("input", "SHAPE", "sample shape C,H,W or F (default per model: " + example_inputs() + ")");
  p.add_option("classes", "K", "classes (0: regression with one target)", false, "10");
  p.add_option("optimizer", "NAME", "update rule (server/optimizers)", false, "sgd");
  p.add_option("lr", "LR", "learning rate", false, "0.01");
  p.add_option("device", "DEV", "cpu|cuda", false, "cpu");
  p.add_option("seed", "S", "seed of weights and data", false, "1");
  p.add_flag("json", "print one JSON object");
  if (!p.parse(args)) return 0;

  models::ModelSpec spec;
  spec.name = p.get("model");
  spec.hidden = parse_int_list(p.get("hidden"), "--hidden");
  spec.input_shape =
      p.has("input") ? parse_int_list(p.get("input"), "--input") : models::model_info(spec.name).example_input;
  spec.num_classes = p.get_int("classes");
  spec.target_dim = 1;
  const int64_t batch = p.get_int("batch"), iters = p.get_int("iters"), warmup = p.get_int("warmup");
  const int64_t threads = p.get_int("threads");
  if (batch < 1 || iters < 1 || warmup < 0 || threads < 0) {
    throw Error("bench compute: --batch and --iters must be >= 1, --warmup and --threads >= 0");
  }
  std::unique_ptr<models::Backend> backend;
  if (p.get("device") == "cpu") {
    backend = models::make_cpu_backend(static_cast<int>(threads));
  } else if (p.get("device") == "cuda") {
    backend = models::make_cuda_backend(0);
  } else {
    throw Error("bench compute: --device must be cpu or cuda, got '" + p.get("device") + "'");
  }
  auto model = models::Model::create(spec, *backend);
  const uint64_t seed = static_cast<uint64_t>(p.get_int("seed"));
  model->init_params(seed);

  optim::OptimizerParams op;
  op.name = p.get("optimizer");
  op.lr = static_cast<float>(p.get_double("lr"));
  auto optimizer = optim::make_optimizer(op);
  std::vector<std::vector<float>> state;
  for (const models::ParamRef& ref : model->params()) state.emplace_back(ref.numel * optimizer->state_floats(), 0.0f);
  // The update runs on the host: on CUDA the gradients come down and the weights go up, as a worker's would.
  const bool host = backend->host_accessible();
  std::vector<float> w_host, g_host;

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

  double fwd_ms = 0, bwd_ms = 0, upd_ms = 0, loss = 0;
  int64_t t = 0;
  auto step = [&](bool timed) {
    auto t0 = Clock::now();
    models::StepResult r = model->forward(x.data(), batch, spec.num_classes > 0 ? labels.data() : nullptr,
                                          spec.num_classes > 0 ? nullptr : targets.data(), true);
    auto t1 = Clock::now();
    model->backward();
    backend->synchronize();
    auto t2 = Clock::now();
    ++t;
    for (size_t i = 0; i < model->params().size(); ++i) {
      const models::ParamRef& ref = model->params()[i];
      if (host) {
        optimizer->apply(ref.value, ref.grad, state[i].data(), ref.numel, op.lr, t);
      } else {
        w_host.resize(ref.numel), g_host.resize(ref.numel);
        backend->download(w_host.data(), ref.value, ref.numel * sizeof(float));
        backend->download(g_host.data(), ref.grad, ref.numel * sizeof(float));
        optimizer->apply(w_host.data(), g_host.data(), state[i].data(), ref.numel, op.lr, t);
        backend->upload(ref.value, w_host.data(), ref.numel * sizeof(float));
      }
    }
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

  if (p.flag("json")) {
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
        .set("optimizer", op.name)
        .set("last_loss", loss);
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("bench compute: %s (%lld parameters), batch %lld, %s, %lld steps\n", spec.name.c_str(),
                static_cast<long long>(model->num_params_elems()), static_cast<long long>(batch),
                backend->describe().c_str(), static_cast<long long>(iters));
    std::printf(
        "  %.0f samples/s   %.3f ms/step (forward %.3f, backward %.3f, %s update %.3f; cpu %.3f ms)   loss %.4f\n",
        samples_per_s, total_ms / iters, fwd_ms / iters, bwd_ms / iters, op.name.c_str(), upd_ms / iters, cpu_ms, loss);
  }
  return 0;
}

}  // namespace

PSHARD_BENCH(compute, "forward + backward + update of a model on synthetic data (samples/s)", run_bench_compute);

}  // namespace pshard::app
