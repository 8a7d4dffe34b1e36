// The C API of a pshard worker (pshard_c.h), a shim over ClusterClient and KvClient that turns exceptions into
// status codes and job events into ABORTED: the client's life (connect, tensors, start, close) and the job's facts
// (client.h: the client and the helpers the calls share; requests.cc, metrics.cc: the other calls).
#include "worker/capi/pshard_c.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/config/schema.h"
#include "common/metrics/start_event.h"
#include "common/transport/curve.h"
#include "common/util/log.h"
#include "worker/capi/client.h"

using namespace pshard::capi;  // the C API's own helpers (client.h)

namespace {

// Rank 0 of a fresh or resumed run writes its tensor list and the run's first metrics line.
void report_program_start(pshard_client* c, const char* model, uint32_t world) {
  write_tensor_list(c);  // before any init: a refused rank reads it after the servers installed the layout
  uint64_t model_bytes = 0;
  for (const pshard::TensorSpec& t : c->tensors) model_bytes += t.numel * sizeof(float);
  pshard::StartEvent start = pshard::StartEvent::from_config(c->cfg, model, c->batch_size, world, c->steps_per_epoch);
  start.model_bytes = model_bytes;
  start.epochs = c->epochs;  // 0: the program did not declare its length
  start.program = true;
  start.start_step = c->start_step();  // > 0: a resumed run
  c->cluster->report(start.to_json());
}

}  // namespace

extern "C" {

const char* pshard_last_error(void) { return last_error().c_str(); }

const char* pshard_status_name(int status) {
  switch (status) {
    case PSHARD_OK: return "PSHARD_OK";
    case PSHARD_PENDING: return "PSHARD_PENDING";
    case PSHARD_JOB_ENDED: return "PSHARD_JOB_ENDED";
    case PSHARD_ERR_ARGUMENT: return "PSHARD_ERR_ARGUMENT";
    case PSHARD_ERR_ENVIRONMENT: return "PSHARD_ERR_ENVIRONMENT";
    case PSHARD_ERR_CONFIG: return "PSHARD_ERR_CONFIG";
    case PSHARD_ERR_CONNECT: return "PSHARD_ERR_CONNECT";
    case PSHARD_ERR_STATE: return "PSHARD_ERR_STATE";
    case PSHARD_ERR_SERVER: return "PSHARD_ERR_SERVER";
    case PSHARD_ERR_TIMEOUT: return "PSHARD_ERR_TIMEOUT";
    case PSHARD_ERR_ABORTED: return "PSHARD_ERR_ABORTED";
    case PSHARD_ERR_INTERNAL: return "PSHARD_ERR_INTERNAL";
    default: return "PSHARD_UNKNOWN_STATUS";
  }
}

int pshard_connect(pshard_client** out) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(out, "out");
    *out = nullptr;
    auto c = std::make_unique<pshard_client>();
    c->env = read_node_env();
    const std::string& coordinator = require_env(c->env.coordinator, "PSHARD_COORDINATOR");
    const std::string& config_path = require_env(c->env.config_path, "PSHARD_CONFIG");
    c->local_rank = std::max<int64_t>(c->env.local_rank, 0);
    try {
      c->cfg = pshard::Config::from_file(config_path, c->env.overrides);
    } catch (const std::exception& e) {
      throw Failure{PSHARD_ERR_CONFIG, e.what()};
    }
    const pshard::Config& cfg = c->cfg;
    pshard::log::configure("worker", pshard::log::level_from_string(cfg.get_string("log.level")));
    c->copt = pshard::ClusterClient::Options::from_config(cfg, pshard::NodeRole::kWorker, coordinator, c->env);
    try {
      c->copt.curve =
          pshard::transport::job_curve_keys(cfg, pshard::transport::curve_key_dir(cfg, c->env.key_dir, c->env.run_dir));
    } catch (const std::exception& e) {
      throw Failure{PSHARD_ERR_CONFIG, e.what()};
    }
    // 0: the tensors are declared after the rendezvous; the servers check every request against rank 0's list.
    c->copt.layout_fingerprint = 0;
    c->copt.replaces_live = c->env.rejoin;  // restarted by the launcher: it takes its rank back
    c->log_every = cfg.get_int("train.log_every");
    try {
      // A library does not exit at the job's abort: the caller's next request fails.
      c->worker = std::make_unique<pshard::WorkerSession>(cfg, c->copt);
    } catch (const std::exception& e) {
      throw Failure{PSHARD_ERR_CONNECT, e.what()};
    }
    c->cluster = &c->worker->cluster();
    pshard::log::configure("worker " + std::to_string(c->rank()),
                           pshard::log::level_from_string(cfg.get_string("log.level")));
    *out = c.release();
    return PSHARD_OK;
  });
}

int pshard_close(pshard_client* c, int exit_status, const char* reason) {
  if (c == nullptr) return PSHARD_OK;
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    std::unique_ptr<pshard_client> owned(c);
    const bool elastic = owned->cluster->map().elastic();
    const std::string early = exit_status == 0 && elastic ? owned->left_elastic_job_early() : "";
    // A worker of an elastic job that leaves before its end did not finish it, whatever status it gives: the job's
    // failure policy decides (abort: the job fails naming it; continue: it counts as a dead worker).
    std::string why = reason ? reason : "";
    if (!early.empty()) {
      exit_status = 1;
      why = early + (why.empty() ? "" : " (" + why + ")");
      PSHARD_LOG(kError) << why;
    }
    owned->kv = nullptr;
    owned->worker->leave(exit_status, why, owned->tracer.get());
    owned->cluster = nullptr;
    owned->worker.reset();
    return PSHARD_OK;
  });
}

int pshard_rank(const pshard_client* c) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int { return static_cast<int>(require(c, "client")->rank()); });
}

int pshard_size(const pshard_client* c) {
  return guarded(PSHARD_ERR_INTERNAL,
                 [&]() -> int { return static_cast<int>(require(c, "client")->cluster->map().num_workers); });
}

int pshard_elastic(const pshard_client* c) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int { return require(c, "client")->cluster->map().elastic() ? 1 : 0; });
}

int pshard_epoch_plan(pshard_client* c, int64_t epoch, int64_t step, int64_t* first_step, int* index, int* count,
                      uint32_t* members, int max_members) {
  return guarded(PSHARD_ERR_SERVER, [&]() -> int {
    require(c, "client");
    require(first_step, "first_step");
    require(index, "index");
    require(count, "count");
    if (!c->cluster->map().elastic()) {
      throw Failure{PSHARD_ERR_STATE, "pshard: epoch plans are for elastic jobs (pshard launch --workers MIN:MAX)"};
    }
    if (!c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: ask for an epoch's plan after pshard_start"};
    if (epoch < 1 || epoch > c->epochs) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: epoch " + std::to_string(epoch) +
                                             " is outside 1..train.epochs = " + std::to_string(c->epochs)};
    }
    // The plan of the epoch asked for last is kept (a joining worker's first is the one it joined with); every other
    // epoch's is asked for at its start.
    if (!(c->plan && epoch == c->plan->epoch)) {
      if (c->joining() && c->plan && epoch < c->plan->epoch) {
        throw Failure{PSHARD_ERR_ARGUMENT, "pshard: this worker joined the job with epoch " +
                                               std::to_string(c->plan->epoch) + " (0-based " +
                                               std::to_string(c->plan->epoch - 1) + "); it cannot train epoch " +
                                               std::to_string(epoch) + " (start the loop at ps.start_epoch())"};
      }
      std::optional<pshard::EpochPlan> plan;
      try {
        plan = c->worker->enter_epoch(epoch, step);
      } catch (const std::exception& e) {
        if (!c->aborted().empty()) return request_failed(c, e, 0);
        throw Failure{PSHARD_ERR_TIMEOUT, e.what()};
      }
      if (!plan) throw Failure{PSHARD_ERR_ABORTED, "pshard: the job ended before epoch " + std::to_string(epoch)};
      c->plan = plan;
    }
    const pshard::EpochPlan& p = *c->plan;
    auto me = std::find(p.members.begin(), p.members.end(), c->rank());
    if (p.epoch != epoch || me == p.members.end()) {
      throw Failure{PSHARD_ERR_STATE, "pshard: the coordinator's plan of epoch " + std::to_string(p.epoch) +
                                          " does not fit worker " + std::to_string(c->rank()) + " at epoch " +
                                          std::to_string(epoch)};
    }
    *first_step = p.first_step;
    *index = static_cast<int>(me - p.members.begin());
    *count = static_cast<int>(p.members.size());
    for (int i = 0; members && i < max_members && i < *count; ++i) members[i] = p.members[static_cast<size_t>(i)];
    // The learning rate reported follows the global batch of the epoch's members, as the servers' does.
    const uint32_t n = static_cast<uint32_t>(p.members.size());
    const int64_t global = c->batch_size * static_cast<int64_t>(n);
    c->worker->follow_members(n);
    if (c->plan_told < p.epoch) {
      c->plan_told = p.epoch;
      c->worker->announce_epoch(p, c->batch_size, global, -1, c->worker->lr_at(p.first_step));
    }
    return PSHARD_OK;
  });
}

int pshard_joining_epoch(const pshard_client* c, int64_t* out) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(out, "out");
    if (!c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: the epoch a worker joins with is known after pshard_start"};
    *out = c->joining() && c->plan ? c->plan->epoch : 0;
    return PSHARD_OK;
  });
}

int pshard_local_rank(const pshard_client* c) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int { return static_cast<int>(require(c, "client")->local_rank); });
}

int pshard_config_type(const char* key) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(key, "key");
    const pshard::ConfigKey* k = pshard::find_config_key(key);
    if (k == nullptr) throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: unknown config key '") + key + "'"};
    switch (k->type) {
      case pshard::ConfigType::kString: return PSHARD_CONFIG_STRING;
      case pshard::ConfigType::kInt: return PSHARD_CONFIG_INT;
      case pshard::ConfigType::kDouble: return PSHARD_CONFIG_DOUBLE;
      case pshard::ConfigType::kBool: return PSHARD_CONFIG_BOOL;
      case pshard::ConfigType::kIntList: return PSHARD_CONFIG_INT_LIST;
    }
    return PSHARD_CONFIG_STRING;
  });
}

int pshard_config_get(const pshard_client* c, const char* key, char* buf, size_t len) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(key, "key");
    const pshard::ConfigKey* k = pshard::find_config_key(key);
    if (k == nullptr) throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: unknown config key '") + key + "'"};
    std::string text;
    switch (k->type) {
      case pshard::ConfigType::kString: text = c->cfg.get_string(key); break;
      case pshard::ConfigType::kInt: text = std::to_string(c->cfg.get_int(key)); break;
      case pshard::ConfigType::kDouble: {
        std::ostringstream s;
        s.precision(17);
        s << c->cfg.get_double(key);
        text = s.str();
        break;
      }
      case pshard::ConfigType::kBool: text = c->cfg.get_bool(key) ? "true" : "false"; break;
      case pshard::ConfigType::kIntList: {
        text = "[";
        for (int64_t v : c->cfg.get_int_list(key)) text += (text.size() > 1 ? ", " : "") + std::to_string(v);
        text += "]";
        break;
      }
    }
    if (len > 0) {
      require(buf, "buf");
      const size_t n = std::min(text.size(), len - 1);
      std::memcpy(buf, text.data(), n);
      buf[n] = '\0';
    }
    return static_cast<int>(text.size());
  });
}

int pshard_barrier(pshard_client* c, const char* name, int64_t timeout_ms) {
  int any_vote = 0;
  return pshard_barrier_vote(c, name, 0, &any_vote, timeout_ms);
}

int pshard_barrier_vote(pshard_client* c, const char* name, int vote, int* any_vote, int64_t timeout_ms) {
  return guarded(PSHARD_ERR_TIMEOUT, [&]() -> int {
    require(c, "client");
    require(name, "name");
    require(any_vote, "any_vote");
    const std::chrono::milliseconds limit(timeout_ms < 0 ? int64_t{365} * 24 * 3600 * 1000 : timeout_ms);
    try {
      *any_vote = c->cluster->barrier_vote(name, vote != 0, limit) ? 1 : 0;
    } catch (const std::exception& e) {
      if (!c->aborted().empty()) return request_failed(c, e, 0);
      throw;
    }
    return PSHARD_OK;
  });
}

int pshard_add_tensor(pshard_client* c, const char* name, int ndim, const int64_t* shape, int dtype) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(name, "name");
    if (c->kv)
      throw Failure{PSHARD_ERR_STATE, std::string("pshard: tensor '") + name + "' declared after pshard_start"};
    if (*name == '\0') throw Failure{PSHARD_ERR_ARGUMENT, "pshard: a tensor name is empty"};
    if (dtype != PSHARD_FLOAT32) {
      throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: tensor '") + name + "' has dtype " +
                                             std::to_string(dtype) + "; the servers hold float32 only"};
    }
    if (ndim < 0 || (ndim > 0 && shape == nullptr)) {
      throw Failure{PSHARD_ERR_ARGUMENT,
                    std::string("pshard: tensor '") + name + "' has a bad shape (ndim " + std::to_string(ndim) + ")"};
    }
    if (std::find(c->names.begin(), c->names.end(), name) != c->names.end()) {
      throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: tensor '") + name + "' is declared twice"};
    }
    uint64_t numel = 1;
    std::string dims;
    for (int i = 0; i < ndim; ++i) {
      if (shape[i] < 1 || shape[i] > (int64_t{1} << 40)) {
        throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: tensor '") + name + "' dimension " + std::to_string(i) +
                                               " is " + std::to_string(shape[i])};
      }
      numel *= static_cast<uint64_t>(shape[i]);
      dims += (i ? "," : "") + std::to_string(shape[i]);
    }
    // The shape is part of the name, so that ranks whose tensors differ only in shape disagree on the layout.
    c->tensors.push_back({std::string(name) + "[" + dims + "]", numel});
    c->names.push_back(name);
    return static_cast<int>(c->tensors.size() - 1);
  });
}

int pshard_start(pshard_client* c, const char* model, int64_t batch_size, int64_t steps_per_epoch) {
  return guarded(PSHARD_ERR_SERVER, [&]() -> int {
    require(c, "client");
    if (c->kv) throw Failure{PSHARD_ERR_STATE, "pshard: pshard_start called twice"};
    if (c->tensors.empty()) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: the model has no trainable parameters (no tensor was declared)"};
    }
    if (batch_size < 1 || steps_per_epoch < 0) {
      throw Failure{PSHARD_ERR_ARGUMENT, "pshard: batch_size must be >= 1 and steps_per_epoch >= 0, got " +
                                             std::to_string(batch_size) + " and " + std::to_string(steps_per_epoch)};
    }
    const pshard::Config& cfg = c->cfg;
    const bool elastic = c->worker->elastic();
    const uint32_t world = c->worker->first_world();
    // train.epochs is the program's declared length (progress, ETA, a schedule's length) where set; an elastic
    // job's end is its epochs.
    const int64_t epochs = elastic || cfg.is_set("train.epochs") ? cfg.get_int("train.epochs") : 0;
    c->epochs = epochs;
    // An elastic job's epochs have as many steps as its members make: its end is known by the epochs reported.
    if (elastic) steps_per_epoch = 0;
    c->steps_per_epoch = steps_per_epoch;
    c->batch_size = batch_size;
    const int64_t total_steps = steps_per_epoch * epochs;
    c->total_steps = total_steps;
    // A cosine schedule without lr_schedule.total_steps in an elastic job was refused with the config (config.cc).
    if (c->worker->job().uneven_batches()) {
      throw Failure{PSHARD_ERR_CONFIG,
                    "pshard: train.worker_batch_sizes is for pshard's own workers: a program's batches are its data "
                    "loader's, and its gradients are not weighted by them"};
    }
    if (c->worker->job().dynamic_batches) {
      throw Failure{PSHARD_ERR_CONFIG,
                    "pshard: cluster.batch_assignment = dynamic is for pshard's own workers: a program's batches are "
                    "its data loader's (keep the default, static)"};
    }
    if (elastic && c->worker->job().elastic_global_batch) {
      throw Failure{PSHARD_ERR_CONFIG,
                    "pshard: cluster.elastic_batch = global is for pshard's own workers: a program's per-worker batch "
                    "is its data loader's (keep the default, worker)"};
    }
    const pshard::StartRequest request{std::max<int64_t>(c->env.start_step, 0), c->env.rejoin, c->env.run_dir,
                                       c->scales_loss};
    if (request.rejoin && !elastic && steps_per_epoch == 0) {
      throw Failure{PSHARD_ERR_ARGUMENT,
                    "pshard: a restarted worker rejoins at a step boundary of the run: give steps_per_epoch "
                    "(DistributedOptimizer(model, steps_per_epoch=N))"};
    }
    const pshard::optim::LrPolicy& lr = c->worker->lr_policy();
    if (lr.shape.name == "cosine" && lr.shape.total_steps == 0 && total_steps == 0) {
      throw Failure{PSHARD_ERR_CONFIG,
                    "pshard: lr_schedule.name = cosine needs the run's length: set train.epochs and give "
                    "steps_per_epoch (DistributedOptimizer(model, steps_per_epoch=N)), or set lr_schedule.total_steps"};
    }
    try {
      if (!c->worker->start(c->tensors, total_steps, request)) return PSHARD_JOB_ENDED;
    } catch (const pshard::StartRefused& e) {
      throw Failure{PSHARD_ERR_STATE, std::string("pshard: ") + e.what()};
    }
    c->kv = &c->worker->kv();
    c->plan = c->worker->joined_with();  // a joiner's first epoch
    if (!c->tables.empty()) {            // every worker declares them; the servers make the rows at the first
      c->kv->wait(c->kv->declare_tables(c->tables, static_cast<uint64_t>(cfg.get_int("run.seed"))));
    }
    // The timeline (trace.steps): this process's steps and requests, written to RUN_DIR/trace at pshard_close.
    const pshard::TraceWindow window = pshard::TraceWindow::parse(cfg.get_string("trace.steps"), "trace.steps");
    if (!window.empty()) {
      c->tracer = std::make_unique<pshard::Tracer>(window, "worker " + std::to_string(c->rank()));
      pshard::Tracer::name_this_thread(c->tracer.get(), 0, "training (the caller's thread)");
      c->tracer->name_row(1, "requests (issued to done)");
    }
    if (c->rank() == 0 && !c->rejoin()) report_program_start(c, model ? model : "custom", world);
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    c->gpu = pshard::make_gpu_sampler(c->worker->job().cuda() || (visible && *visible && std::string(visible) != "-1"));
    c->connected_at = Clock::now();
    return PSHARD_OK;
  });
}

}  // extern "C"
