// Data + backend + model from a config.
#include "worker/trainer/run_setup.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "common/config/config.h"
#include "common/config/job_shape.h"
#include "common/error.h"
#include "common/util/host.h"
#include "models/layers/embedding.h"
#include "worker/trainer/batch_rows.h"
#include "worker/trainer/model_file.h"
#include "worker/trainer/model_init.h"

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
  const JobShape job = JobShape::from_config(cfg);
  const models::Precision precision = models::precision_from_name(job.precision);
  if (job.cuda()) {
    // One GPU per worker: launchers set CUDA_VISIBLE_DEVICES (by local rank
    // under SLURM), so a worker always uses its device 0.
    s.backend = models::make_cuda_backend(0, /*allow_tf32=*/false,
                                          models::cuda_conv_wgrad_from_name(cfg.get_string("train.cuda_conv_wgrad")),
                                          models::kCudaWgradWorkspaceBytes, precision);
  } else {
    s.backend = models::make_cpu_backend(compute_threads(cfg),
                                         models::cpu_kernels_from_name(cfg.get_string("train.cpu_kernels")), precision);
  }
  models::ModelSpec spec =
      models::ModelSpec::from_config(cfg, s.data.train.sample_shape, s.data.train.num_classes, s.data.train.target_dim);
  // Click data: one embedding table per categorical field.
  spec.table_rows = model_table_rows(s.data.train.table_rows, TableSettings::from_config(cfg));
  s.model = models::Model::create(spec, *s.backend);
  s.model->init_params(static_cast<uint64_t>(cfg.get_int("run.seed")));
  if (const std::string from = cfg.get_string("train.init_from"); !from.empty()) {
    std::vector<NamedTensor> tensors;
    try {
      tensors = load_model_file(from);
    } catch (const Error& e) {
      throw Error(std::string("train.init_from: ") + e.what());
    }
    const ModelInitReport report = init_from_tensors(*s.model, tensors, "train.init_from " + from);
    s.init_report = "train.init_from " + from + ": " + report.describe();
  }
  const std::vector<std::string> frozen = freeze_prefixes(cfg.get_string("train.freeze"));
  if (!frozen.empty()) {
    try {
      s.model->freeze(frozen);
    } catch (const Error& e) {
      throw Error(std::string("train.freeze: ") + e.what());
    }
  }
  return s;
}

std::vector<std::string> freeze_prefixes(const std::string& list) {
  std::vector<std::string> prefixes;
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(at, comma - at);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) prefixes.push_back(item);
    at = comma + 1;
  }
  return prefixes;
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
  std::string line = buf;
  if (const int frozen = setup.model->num_frozen(); frozen > 0) {
    int64_t elems = 0;
    for (const models::ParamRef& p : setup.model->params()) elems += p.frozen ? p.numel : 0;
    line += "; " + std::to_string(frozen) + " tensors (" + std::to_string(elems) + " parameters) frozen";
  }
  if (const models::Embedding* layer = setup.model->embedding()) {  // the rows are not parameters of the model
    uint64_t rows = 0;
    for (const models::TableDecl& t : layer->tables()) rows += t.rows;
    std::snprintf(buf, sizeof buf, "; %lld embedding tables, %llu rows x %lld (%.2f MiB of float32 rows)",
                  static_cast<long long>(layer->fields()), static_cast<unsigned long long>(rows),
                  static_cast<long long>(layer->dim()),
                  static_cast<double>(rows) * static_cast<double>(layer->dim()) * 4 / 1048576.0);
    line += buf;
  }
  return line;
}

}  // namespace pshard::trainer
