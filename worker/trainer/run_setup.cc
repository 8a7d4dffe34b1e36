// Data + backend + model from a config.
#include "worker/trainer/run_setup.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "common/config/config.h"
#include "common/error.h"
#include "common/util/host.h"

namespace pshard::trainer {

int compute_threads(const Config& cfg) {
  const int64_t configured = cfg.get_int("train.threads");
  if (configured > 0) return static_cast<int>(configured);
  const int cores = allowed_cpus();
  const char* shared = std::getenv("PSHARD_WORKERS_ON_HOST");
  if (shared == nullptr || *shared == '\0') return cores;
  char* end = nullptr;
  const long workers = std::strtol(shared, &end, 10);
  if (*end != '\0' || workers < 1) {
    throw Error(
        std::string("PSHARD_WORKERS_ON_HOST must be a positive integer (the workers sharing this host), got '") +
        shared + "'");
  }
  return static_cast<int>(std::max<long>(1, cores / workers));
}

TrainingSetup make_training_setup(const Config& cfg) {
  TrainingSetup s;
  s.data = data::load_data(cfg);
  const std::string device = cfg.get_string("train.device");
  const models::Precision precision = models::precision_from_name(cfg.get_string("train.precision"));
  // train.precision other than fp32 with train.device = cuda is refused by the config's checks (config.cc).
  if (device == "cuda") {
    // One GPU per worker: launchers set CUDA_VISIBLE_DEVICES (by local rank
    // under SLURM), so a worker always uses its device 0.
    s.backend = models::make_cuda_backend(0, /*allow_tf32=*/false,
                                          models::cuda_conv_wgrad_from_name(cfg.get_string("train.cuda_conv_wgrad")));
  } else {
    s.backend = models::make_cpu_backend(compute_threads(cfg),
                                         models::cpu_kernels_from_name(cfg.get_string("train.cpu_kernels")), precision);
  }
  models::ModelSpec spec =
      models::ModelSpec::from_config(cfg, s.data.train.sample_shape, s.data.train.num_classes, s.data.train.target_dim);
  s.model = models::Model::create(spec, *s.backend);
  s.model->init_params(static_cast<uint64_t>(cfg.get_int("run.seed")));
  return s;
}

int64_t model_bytes(const models::Model& model) { return model.num_params_elems() * 4; }

std::string describe_setup(const Config& cfg, const TrainingSetup& setup) {
  // A profile model names its file: the architecture is there, not in model.name.
  std::string model = cfg.get_string("model.name");
  if (model == "profile") model += " " + cfg.get_string("model.profile");
  char buf[1024];
  std::snprintf(buf, sizeof buf, "%s, %lld parameters (%.2f MiB) in %zu tensors, %s; data %s: %lld train / %lld test",
                model.c_str(), static_cast<long long>(setup.model->num_params_elems()),
                model_bytes(*setup.model) / 1048576.0, setup.model->params().size(), setup.backend->describe().c_str(),
                cfg.get_string("data.name").c_str(), static_cast<long long>(setup.data.train.size()),
                static_cast<long long>(setup.data.test.size()));
  return buf;
}

}  // namespace pshard::trainer
