// The worker process: rendezvous, KV client, training loop, reports (see worker_process.h).
#include "worker/worker_process.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <optional>

#include "common/compression/settings.h"
#include "common/config/config.h"
#include "common/config/job_shape.h"
#include "common/control/cluster_client.h"
#include "common/error.h"
#include "common/keys/slice_layout.h"
#include "common/metrics/epoch_report.h"
#include "common/metrics/start_event.h"
#include "common/metrics/trace.h"
#include "common/run/node_env.h"
#include "common/transport/curve.h"
#include "common/util/log.h"
#include "common/util/signals.h"
#include "worker/client/kv_client.h"
#include "worker/session/worker_session.h"
#include "worker/trainer/kv_sync.h"
#include "worker/trainer/model_file.h"
#include "worker/trainer/run_setup.h"
#include "worker/trainer/trainer.h"

namespace pshard {

namespace {

// SIGTERM under checkpoint.on_sigterm = checkpoint: the job stops at the next step boundary (KvSync::set_stop_signal).
std::atomic<bool> g_sigterm{false};

// The training loop's options for this worker of `world`, starting at `start_step`.
trainer::TrainerOptions trainer_options(const Config& cfg, uint32_t rank, uint32_t world, int64_t start_step, bool join,
                                        const std::string& run_dir) {
  trainer::TrainerOptions opts = trainer::TrainerOptions::from_config(cfg, rank, world);
  opts.start_step = start_step;
  if (start_step > 0 && !join && opts.loss_scaler.active()) {
    // A resumed run's loss scale, its clean steps and its data position continue from the steps it skipped.
    opts.skipped_before = trainer::skipped_steps_in(run_dir);
    if (!opts.skipped_before) {
      PSHARD_LOG(kWarn) << "resuming at step " << start_step << " without the run's metrics in " << run_dir
                        << " (metrics.jsonl*): the loss scale starts again from train.loss_scale, and the data "
                           "position does not count the steps the run skipped before";
    }
  }
  return opts;
}

// An elastic job's epochs: a member waits at an epoch's start for the others to finish the epoch before, and for
// workers to join when fewer than min_workers are left (WorkerSession::enter_epoch); each epoch's plan sets the global
// batch, and its lowest member reports it.
void plan_elastic_epochs(trainer::TrainerOptions& opts, WorkerSession& worker, std::optional<EpochPlan>& last_plan) {
  opts.plan_epoch = [&worker](int64_t epoch, int64_t step) { return worker.enter_epoch(epoch, step); };
  opts.joining = worker.joined_with();
  opts.joined = [&worker](int64_t epoch) { worker.cluster().epoch_joined(epoch); };
  // cluster.elastic_batch = global: the global batch stays that of the fewest workers, whoever trains.
  const bool fixed_global = worker.job().elastic_global_batch;
  if (fixed_global) opts.elastic_global_batch = opts.batch_size * static_cast<int64_t>(worker.first_world());
  const int64_t elastic_global_batch = opts.elastic_global_batch;
  opts.on_plan = [&worker, &last_plan, fixed_global, elastic_global_batch](const EpochPlan& plan, int64_t steps,
                                                                           int64_t batch) {
    last_plan = plan;
    const int64_t global = batch * static_cast<int64_t>(plan.members.size());
    worker.follow_members(static_cast<uint32_t>(plan.members.size()));
    const std::string rounded = fixed_global && global != elastic_global_batch
                                    ? " (" + std::to_string(elastic_global_batch) + " / " +
                                          std::to_string(plan.members.size()) + " rounded down)"
                                    : std::string();
    worker.announce_epoch(plan, batch, global, steps, worker.lr_at(plan.first_step), rounded);
  };
}

// Loss scaling in a sync job: every worker skips a step whose gradients some worker found not finite, so that no
// server applies a part of it. Each push says whether its worker's gradients were, and the servers skip the step for
// all (async and SSP workers skip their own such steps alone).
void skip_steps_with_servers(trainer::KvSync& sync, const trainer::TrainerOptions& opts, WorkerSession& worker,
                             bool join) {
  if (!opts.loss_scaler.active() || !worker.job().sync()) return;
  if (join) {
    throw Error(
        "pshard worker: a worker rejoining the job cannot take part in skipping the steps some worker's gradients "
        "overflowed: it would start from a loss scale of its own (train.loss_scaling = " +
        std::string(trainer::loss_scaling_name(opts.loss_scaler.mode())) + ")");
  }
  sync.set_servers_skip(true);
}

// Worker 0 of a fresh or resumed run says what trains and writes the run's first metrics line.
void report_start(ClusterClient& cluster, const Config& cfg, const trainer::TrainingSetup& setup,
                  const trainer::TrainerOptions& opts, uint32_t world, int64_t steps_per_epoch, int64_t start_step) {
  PSHARD_LOG(kInfo) << trainer::describe_setup(cfg, setup) << "; " << world << " workers x batch " << opts.batch_size
                    << ", " << steps_per_epoch << " steps per epoch, mode " << JobShape::from_config(cfg).mode_name();
  if (!setup.init_report.empty()) PSHARD_LOG(kInfo) << setup.init_report;
  StartEvent start =
      StartEvent::from_config(cfg, cfg.get_string("model.name"), opts.batch_size, world, steps_per_epoch);
  start.model_bytes = static_cast<uint64_t>(trainer::model_bytes(*setup.model));
  start.start_step = start_step;  // > 0: a resumed run
  cluster.report(start.to_json());
}

// After the loop: a stop at a checkpoint leaves with kExitStopped (the model is not final, so it is not saved); a
// finished run's model is saved by worker 0, or, when it died, by the lowest worker still alive (every worker holds
// the final weights it pulled; elastic jobs: the lowest live member of the last epoch). Returns the exit status.
// The timeline (`tracer`, null when off) is written as the worker leaves.
int end_training(WorkerSession& worker, const trainer::Trainer& t, models::Model& model, int64_t total_steps,
                 const std::optional<EpochPlan>& last_plan, const std::string& run_dir, const Tracer* tracer) {
  const uint32_t rank = worker.rank();
  if (t.stopped_at() >= 0) {
    const std::string why = "stopped at step " + std::to_string(t.stopped_at()) + " of " + std::to_string(total_steps) +
                            " on SIGTERM (checkpoint.on_sigterm = checkpoint)";
    PSHARD_LOG(kInfo) << why;
    worker.leave(kExitStopped, why, tracer);
    return kExitStopped;
  }
  const bool lowest_alive =
      worker.events().lowest_alive(rank, last_plan ? last_plan->members : std::vector<uint32_t>{});
  if (lowest_alive && !run_dir.empty()) {
    const std::string path = run_dir + "/model.bin";
    try {
      trainer::save_model_file(model, path);
    } catch (const Error& e) {
      // Training is complete: a model that cannot be written (e.g. a full disk) makes the run's records
      // incomplete, not the job a failure; the summary says no model was saved.
      PSHARD_LOG(kError) << e.what() << ": the model was not saved, the run's records are incomplete";
      worker.leave(0, "", tracer);
      return kExitRecordsIncomplete;
    }
    if (rank != 0)
      PSHARD_LOG(kInfo) << "saved the model to " << path << " (the workers below rank " << rank << " died)";
    worker.cluster().tell(ClusterClient::JobFact::kModelSaved, 0, path);
  }
  worker.leave(0, "", tracer);
  return 0;
}

// Runs the training loop, reporting each logged step and each epoch to the coordinator. Every worker logs its steps:
// the step-time spread across workers shows stragglers. A CUDA worker's epochs carry its GPU's utilisation and
// memory, sampled through NVML while it trains (none without NVML).
void train_reporting(trainer::Trainer& t, ClusterClient& cluster, const JobShape& job) {
  std::unique_ptr<GpuSampler> gpu = make_gpu_sampler(job.cuda());
  t.run([&cluster](const trainer::StepEvent& s) { cluster.report(s.to_json()); },
        [&cluster, &gpu](const WorkerEpochReport& epoch) {
          WorkerEpochReport r = epoch;
          r.take_gpu_usage(gpu.get());
          Json j = r.to_json();
          j.set("event", "worker_epoch");
          cluster.report(j);
        });
}

// The KV client stops before what its I/O thread writes into goes: on a CUDA worker the client writes pulled weights
// into the sync's pinned staging buffers, and an error that unwinds with requests in flight must stop that thread
// before the buffers are freed (~KvSync). Declared after the sync, so destroyed before it.
struct KvClientStopsFirst {
  WorkerSession& worker;
  ~KvClientStopsFirst() { worker.close_kv(); }
};

// Everything after the rendezvous: the start, the training loop, the reports, the model file.
int train_through(WorkerSession& worker, const Config& cfg, trainer::TrainingSetup& setup,
                  const std::vector<TensorSpec>& tensors, const WorkerProcessOptions& o) {
  ClusterClient& cluster = worker.cluster();
  const uint32_t rank = worker.rank();
  const bool elastic = worker.elastic();
  const uint32_t world = worker.first_world();
  log::configure("worker " + std::to_string(rank), log::level_from_string(cfg.get_string("log.level")));
  trainer::TrainerOptions opts = trainer_options(cfg, rank, world, o.start_step, o.join, o.run_dir);
  // Elastic jobs: at most one worker's steps (what the run's length bounds: the check of --start-step, a schedule).
  const int64_t total_steps = (elastic ? trainer::steps_per_epoch_for(setup.data.train.size(), 1, opts.batch_size)
                                       : trainer::steps_per_epoch_for(setup.data.train.size(), opts)) *
                              opts.epochs;
  std::optional<trainer::KvSync> sync;
  KvClientStopsFirst stops_first{worker};
  if (!worker.start(tensors, total_steps, StartRequest{o.start_step, o.join, o.run_dir})) {
    worker.leave(0);
    return 0;
  }
  const int64_t start_step = opts.start_step = worker.start_step();
  const bool joined = worker.start_kind() == StartKind::kJoined;
  sync.emplace(worker.kv(), rank, cfg, [&worker](int64_t step) { return worker.lr_at(step); });
  sync->set_start_step(start_step);
  sync->set_rejoin(worker.counted_from_start());
  std::optional<EpochPlan> last_plan;  // elastic: the members of the epoch trained last
  if (elastic) plan_elastic_epochs(opts, worker, last_plan);
  if (worker.job().dynamic_batches) {
    opts.claim_batches = [&worker](int64_t epoch, int64_t batches, uint32_t count) {
      const ClusterClient::BatchGrant g = worker.claim_batches(epoch, batches, count);
      return trainer::ClaimedBatches{g.first, g.count};
    };
  }
  JobEvents& events = worker.events();
  sync->set_initialiser([&events, rank] { return events.initialiser(rank); });
  if (worker.job().checkpoint_on_sigterm) sync->set_stop_signal(&g_sigterm);
  skip_steps_with_servers(*sync, opts, worker, o.join);
  trainer::Trainer t(opts, *setup.model, setup.data, *sync);
  std::unique_ptr<Tracer> tracer;
  const TraceWindow window = TraceWindow::parse(cfg.get_string("trace.steps"), "trace.steps");
  if (!window.empty()) {
    tracer = std::make_unique<Tracer>(window, "worker " + std::to_string(rank));
    t.set_tracer(tracer.get());
    sync->set_tracer(tracer.get());
  }
  if (rank == 0 && !o.join && !joined) report_start(cluster, cfg, setup, opts, world, t.steps_per_epoch(), start_step);
  train_reporting(t, cluster, worker.job());
  // Every step pushed: a death from here on (before the model is saved, before leaving) costs the job nothing.
  if (t.stopped_at() < 0) cluster.tell(ClusterClient::JobFact::kTrained);
  return end_training(worker, t, *setup.model, total_steps, last_plan, o.run_dir, tracer.get());
}

}  // namespace

int run_worker_process(const WorkerProcessOptions& o) {
  if (o.start_step < 0) throw Error("pshard worker: --start-step must be >= 0, got " + std::to_string(o.start_step));

  Config cfg = Config::from_file(o.config_path, o.overrides);
  log::configure("worker", log::level_from_string(cfg.get_string("log.level")));
  // Taken on a thread of its own, before any other starts: a handler would interrupt whichever thread the kernel
  // picks, and the ZeroMQ call it was in would fail (EINTR).
  if (JobShape::from_config(cfg).checkpoint_on_sigterm) watch_signals({SIGTERM}, [](int) { g_sigterm.store(true); });
  trainer::TrainingSetup setup = trainer::make_training_setup(cfg);

  std::vector<TensorSpec> tensors;
  for (const models::ParamRef& prm : setup.model->params()) {
    tensors.push_back({prm.name, static_cast<uint64_t>(prm.numel)});
  }
  const uint64_t slice_bytes = static_cast<uint64_t>(cfg.get_int("cluster.slice_bytes"));

  ClusterClient::Options copt =
      ClusterClient::Options::from_config(cfg, NodeRole::kWorker, o.coordinator, NodeEnv::from_environment());
  if (o.rank >= 0) copt.requested_rank = o.rank;
  copt.replaces_live = o.join;
  copt.curve = transport::job_curve_keys(cfg, transport::curve_key_dir(cfg, o.key_dir, o.run_dir));
  // The assignment is a function of (tensors, slice_bytes, S); S comes from the
  // cluster map, so agreeing on the first two means agreeing on the layout.
  copt.layout_fingerprint = SliceLayout(tensors, slice_bytes, 1).fingerprint();
  // Workers declared dead (cluster.failure_policy = continue): the lowest live worker saves the model.
  WorkerSession worker(cfg, copt, [](const std::string& reason) {
    PSHARD_LOG(kError) << "job aborted: " << reason;
    std::_Exit(1);  // the trainer may be blocked on a pull that will never be answered
  });
  // An error after the rendezvous is told to the coordinator, whose abort then names it.
  try {
    return train_through(worker, cfg, setup, tensors, o);
  } catch (const std::exception& e) {
    worker.leave(1, e.what());
    throw;
  }
}

}  // namespace pshard
