// The training loop.
#include "worker/trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <optional>
#include <thread>
#include <vector>

#include "common/config/config.h"
#include "common/config/job_shape.h"
#include "common/error.h"
#include "common/metrics/ctr_metrics.h"
#include "common/metrics/phase_clock.h"
#include "models/layers/embedding.h"
#include "models/model.h"
#include "worker/data/batch_loader.h"
#include "worker/data/sampler.h"
#include "worker/trainer/batch_rows.h"
#include "worker/trainer/step_trace.h"

namespace pshard::trainer {

Json StepEvent::to_json() const {
  Json j = Json::object()
               .set("event", "step")
               .set("rank", rank)
               .set("epoch", epoch)
               .set("step", step)
               .set("loss", loss)
               .set("lr", lr)
               .set("wall_s", wall_s)
               .set("step_s", step_s);
  phases.set_fields(j);
  if (loss_scale > 0) j.set("loss_scale", loss_scale).set("skipped", skipped);
  return j;
}
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
double seconds_between(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double>(t1 - t0).count();
}

void sleep_ms(double ms) { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms)); }

// Where a step's or an epoch's measurements start: the sync's traffic (epochs only), the clock, the phase totals.
struct Mark {
  SyncStats comm;
  Clock::time_point at;
  std::vector<double> phases;
};

Mark mark(PhaseClock& clock, const PhaseTotals& totals) {
  Mark m;
  m.at = clock.flush();
  m.phases = totals.seconds();
  return m;
}

Mark mark(const ParameterSync& sync, PhaseClock& clock, const PhaseTotals& totals) {
  const SyncStats comm = sync.stats();  // read before the clock, as the epoch's figures always were
  Mark m = mark(clock, totals);
  m.comm = comm;
  return m;
}

WorkerEpochReport new_epoch_report(uint32_t rank, int64_t epoch, bool classification) {
  WorkerEpochReport report;
  report.rank = rank;
  report.epoch = epoch;
  report.has_train_acc = classification;
  report.has_test_acc = classification;
  return report;
}

// One step's forward and backward (or, with train.simulate_compute_ms, sleeps that stand in for them), waiting for
// each layer's weights and handing over each layer's gradients as the sync asks, so communication overlaps compute.
// hand_over false (loss scaling): the gradients stay with the model, for the check before they are handed over.
// slowdown > 1 (an emulated straggler): the sleeps, or the forward's time, are stretched by it; a real backward is
// taken to cost twice its forward, as the sleeps assume.
// rows (a model with embedding tables): the batch's rows, pulled already; the forward waits for them just before the
// Embedding layer, and backward sums their gradients per row (with sleeps: zero gradients of the same rows).
models::StepResult compute_step(models::Model& model, ParameterSync& sync, double simulate_compute_ms, double slowdown,
                                const data::Batch& batch, StepTrace& trace, bool hand_over, BatchRows* rows) {
  const int num_layers = model.num_layers();
  const int rows_layer = rows ? model.embedding_layer() : -1;
  const std::vector<models::ParamRef>& params = model.params();
  models::StepResult r;
  simulate_compute_ms *= slowdown;
  if (simulate_compute_ms > 0) {
    // Communication studies: the same pushes and pulls, compute replaced by sleeps (a backward
    // costs about twice a forward). The pulls are waited for before the "forward", as a real
    // forward would wait for its first layer.
    {
      ScopedPhase forward(WorkerPhase::kForward);
      for (int l = 0; l < num_layers; ++l) {
        if (l == rows_layer) sync.wait_rows();
        sync.wait_layer(l);
      }
      sleep_ms(simulate_compute_ms / 3);
    }
    {
      ScopedPhase backward(WorkerPhase::kBackward);
      sleep_ms(simulate_compute_ms * 2 / 3);
      if (hand_over) sync.grads_ready(0, static_cast<int>(params.size()));
    }
    r.n = batch.n;
    return r;
  }
  {
    ScopedPhase forward(WorkerPhase::kForward);
    const Clock::time_point forward_start = Clock::now();
    r = model.forward(batch.x.data(), batch.n, batch.labels.empty() ? nullptr : batch.labels.data(),
                      batch.targets.empty() ? nullptr : batch.targets.data(), /*train=*/true, [&](int layer) {
                        trace.layer_done(StepTrace::Pass::kForward, layer - 1);
                        if (layer == rows_layer) {
                          sync.wait_rows();
                          rows->gather(model.embedding()->rows(batch.n));
                        }
                        sync.wait_layer(layer);
                        trace.layer_start();
                      });
    trace.layer_done(StepTrace::Pass::kForward, num_layers - 1);
    if (slowdown > 1) sleep_ms((slowdown - 1) * 3 * 1e3 * seconds_since(forward_start));
  }
  ScopedPhase backward(WorkerPhase::kBackward);
  trace.layer_start();
  model.backward([&](int first, int count) {
    trace.layer_done(StepTrace::Pass::kBackward, params[static_cast<size_t>(first)].layer);
    if (hand_over) sync.grads_ready(first, count);
    trace.layer_start();
  });
  if (rows) rows->scatter(model.embedding()->row_grads());
  return r;
}

// The `step` event of a step that ended now; its time and phases when it was logged (`begun` holds their start).
// sync_step: the sync's number of the step (it lags `step` by the steps loss scaling skipped).
StepEvent step_event(uint32_t rank, int64_t epoch, int64_t step, int64_t sync_step, const models::StepResult& r,
                     const ParameterSync& sync, const std::optional<Mark>& begun, PhaseClock& clock,
                     const PhaseTotals& totals, Clock::time_point run_start) {
  StepEvent ev;
  ev.rank = rank;
  ev.epoch = epoch;
  ev.step = step;
  ev.loss = r.n ? r.loss_sum / static_cast<double>(r.n) : 0.0;
  ev.lr = sync.lr_at(sync_step);
  if (begun) {
    ev.step_s = seconds_between(begun->at, clock.flush());
    ev.phases = WorkerPhaseSeconds::between(begun->phases, totals.seconds());
  }
  ev.wall_s = seconds_since(run_start);
  return ev;
}

// The training part of the epoch that began at `begun` ended after `step`: its wall time, phases, last lr and traffic.
void end_epoch(WorkerEpochReport* report, const Mark& begun, int64_t first_step, int64_t step, int64_t sync_step,
               const ParameterSync& sync, PhaseClock& clock, const PhaseTotals& totals, StepTrace& trace) {
  report->epoch_s = seconds_between(begun.at, clock.flush());
  trace.end_epoch();
  report->phases = WorkerPhaseSeconds::between(begun.phases, totals.seconds());
  report->step = step;
  report->steps = step - first_step;
  report->lr = sync.lr_at(std::max<int64_t>(sync_step - 1, 0));  // 0: every step of the run so far was skipped
  const SyncStats comm = sync.stats();
  report->bytes_sent = comm.bytes_sent - begun.comm.bytes_sent;
  report->bytes_recv = comm.bytes_recv - begun.comm.bytes_recv;
  report->fp32_bytes_sent = comm.fp32_bytes_sent - begun.comm.fp32_bytes_sent;
  report->fp32_bytes_recv = comm.fp32_bytes_recv - begun.comm.fp32_bytes_recv;
  report->shm_bytes_sent = comm.shm_bytes_sent - begun.comm.shm_bytes_sent;
  report->shm_bytes_recv = comm.shm_bytes_recv - begun.comm.shm_bytes_recv;
  report->host = comm.host;
}

}  // namespace

TrainerOptions TrainerOptions::from_config(const Config& cfg, uint32_t rank, uint32_t world) {
  TrainerOptions o;
  o.epochs = cfg.get_int("train.epochs");
  o.batch_size = cfg.get_int("train.batch_size");
  o.log_every = cfg.get_int("train.log_every");
  o.eval = cfg.get_bool("train.eval");
  o.rank = rank;
  o.world = world;
  o.seed = static_cast<uint64_t>(cfg.get_int("run.seed"));
  o.prefetch = static_cast<int>(cfg.get_int("data.prefetch"));
  o.simulate_compute_ms = cfg.get_double("train.simulate_compute_ms");
  o.loss_scaler = LossScaler::from_config(cfg);
  if (cfg.get_int("train.straggler_rank") == static_cast<int64_t>(rank)) {
    o.slowdown = cfg.get_double("train.straggler_factor");
  }
  o.backup_workers = JobShape::from_config(cfg).has_backup_workers();
  o.worker_batches = cfg.get_int_list("train.worker_batch_sizes");
  if (!o.worker_batches.empty()) {
    if (o.worker_batches.size() != world) {
      throw Error("train.worker_batch_sizes names " + std::to_string(o.worker_batches.size()) +
                  " batches, but the job has " + std::to_string(world) + " workers: give one a worker");
    }
    o.batch_size = o.worker_batches[rank];
  }
  return o;
}

int64_t TrainerOptions::global_batch() const {
  if (worker_batches.empty()) return static_cast<int64_t>(world) * batch_size;
  int64_t sum = 0;
  for (int64_t b : worker_batches) sum += b;
  return sum;
}

double TrainerOptions::gradient_weight() const {
  if (worker_batches.empty()) return 1.0;
  return static_cast<double>(world) * static_cast<double>(batch_size) / static_cast<double>(global_batch());
}

int64_t steps_per_epoch_for(int64_t n, const TrainerOptions& options) {
  if (options.worker_batches.empty()) return steps_per_epoch_for(n, options.world, options.batch_size);
  const int64_t steps = n / options.global_batch();
  if (steps == 0) {
    throw Error("the training set has " + std::to_string(n) + " samples, fewer than one global batch (" +
                std::to_string(options.global_batch()) +
                ", train.worker_batch_sizes): lower the batches or use more data");
  }
  return steps;
}

int64_t steps_per_epoch_for(int64_t n, uint32_t world, int64_t batch_size) {
  int64_t global_batch = static_cast<int64_t>(world) * batch_size;
  int64_t steps = n / global_batch;
  if (steps == 0) {
    throw Error("the training set has " + std::to_string(n) + " samples, fewer than one global batch (" +
                std::to_string(world) + " workers x batch " + std::to_string(batch_size) +
                "): lower train.batch_size or use more data");
  }
  return steps;
}

Trainer::Trainer(const TrainerOptions& options, models::Model& model, const data::DataSplits& data, ParameterSync& sync)
    : options_(options), model_(model), data_(data), sync_(sync) {
  steps_per_epoch_ = steps_per_epoch_for(data.train.size(), options);
  shard_ = static_cast<int>(options.rank);
  shards_ = static_cast<int>(options.world);
  batch_ = options.batch_size;
  if (const models::Embedding* layer = model.embedding()) {
    if (data.train.id_fields != layer->fields() || data.test.id_fields != layer->fields()) {
      throw Error("model " + model.spec().name + " reads " + std::to_string(layer->fields()) +
                  " categorical fields, but data set '" + data.train.name + "' has " +
                  std::to_string(data.train.id_fields) + ": train it on click data (data.name = synthetic-ctr)");
    }
    rows_ = std::make_unique<BatchRows>(layer->fields(), layer->dim());
  }
}

std::optional<EpochPlan> Trainer::plan(int64_t epoch, int64_t step, bool first) {
  std::optional<EpochPlan> p = first && options_.joining ? options_.joining : options_.plan_epoch(epoch, step);
  if (!p) return p;
  auto me = std::find(p->members.begin(), p->members.end(), options_.rank);
  if (p->epoch != epoch || p->first_step != step || me == p->members.end()) {
    throw Error("the coordinator's plan of epoch " + std::to_string(p->epoch) + " (from step " +
                std::to_string(p->first_step) + ") does not fit worker " + std::to_string(options_.rank) +
                " at the start of epoch " + std::to_string(epoch) + ", step " + std::to_string(step));
  }
  shard_ = static_cast<int>(me - p->members.begin());
  shards_ = static_cast<int>(p->members.size());
  batch_ = options_.elastic_global_batch > 0 ? std::max<int64_t>(1, options_.elastic_global_batch / shards_)
                                             : options_.batch_size;
  return p;
}

Trainer::~Trainer() = default;

// Everything on this thread between two ScopedPhases counts as other; the phases of an epoch are read at the same
// instants as its wall time, so they add up to it. trace.steps: each layer's forward runs from the end of its wait for
// weights to the next layer's wait; a backward span ends where a layer's gradients are final.
struct Trainer::Loop {
  Loop(Tracer* tracer, models::Model& model, const std::function<void(const StepEvent&)>& on_step,
       const std::function<void(const WorkerEpochReport&)>& on_epoch)
      : totals(static_cast<size_t>(WorkerPhase::kCount)),
        clock(totals, static_cast<size_t>(WorkerPhase::kOther)),
        trace(tracer, clock, model),
        on_step(on_step),
        on_epoch(on_epoch) {}
  const Clock::time_point start = Clock::now();
  PhaseTotals totals;
  PhaseClock clock;
  StepTrace trace;
  std::unique_ptr<data::BatchLoader> loader;  // elastic jobs cut each epoch's data among its members: one per epoch
  data::Batch batch;
  Mark epoch_start;
  const std::function<void(const StepEvent&)>& on_step;
  const std::function<void(const WorkerEpochReport&)>& on_epoch;
};

bool Trainer::train_step(Loop& loop, int64_t epoch, int64_t step, WorkerEpochReport& report) {
  LossScaler& scaler = options_.loss_scaler;
  const int64_t sync_step = step - scaler.skipped();
  if (sync_.stop_before(sync_step)) {  // checkpoint.on_sigterm: the job ends at this step boundary
    stopped_at_ = sync_step;
    return false;
  }
  // Backup workers: the servers went on without this late worker; when they reached the run's end, so has it. (A
  // worker claiming its batches trains as many steps as it claims: its count may pass total_steps().)
  if (!options_.claim_batches && sync_.weights_step(sync_step) >= total_steps()) {
    ended_late_ = true;
    return false;
  }
  const bool logged = options_.log_every > 0 && step % options_.log_every == 0;
  loop.trace.begin_step(step);
  const std::optional<Mark> step_start = logged ? std::optional<Mark>(mark(loop.clock, loop.totals)) : std::nullopt;
  {
    ScopedPhase data(WorkerPhase::kData);
    if (!loop.loader->next(&loop.batch)) throw Error("data loader ended early at step " + std::to_string(step));
    if (rows_) rows_->prepare(loop.batch.ids.data(), loop.batch.n);
  }
  sync_.begin_step(sync_step);
  if (rows_) sync_.pull_rows(sync_step, *rows_);
  const float loss_scale = scaler.scale();
  // Uneven batches (train.worker_batch_sizes): backward weighs this worker's gradients by its share of the step's
  // samples; the scaler divides its own scale back out and leaves that weight.
  const double weight = options_.gradient_weight();
  if (scaler.active() || weight != 1.0) model_.set_loss_scale(static_cast<float>(loss_scale * weight));
  const models::StepResult r = compute_step(model_, sync_, options_.simulate_compute_ms, options_.slowdown, loop.batch,
                                            loop.trace, !scaler.active(), rows_.get());
  if (rows_) sync_.push_rows(sync_step, *rows_);
  bool applied = true;
  if (scaler.active()) {
    bool finite = true;
    {
      ScopedPhase unscale(WorkerPhase::kBackward);
      finite = scaler.unscale(model_.backend(), model_.params());
    }
    applied = sync_.finish_scaled(finite, static_cast<int>(model_.params().size()));
    scaler.update(applied);  // an Error when every step is being skipped
  }
  if (applied) {
    sync_.end_step(sync_step);
  } else {
    sync_.skip_step(sync_step);
  }
  loop.trace.end_step(step);
  report.samples += r.n;
  report.loss_sum += r.loss_sum;
  report.correct += r.correct;
  const bool diverged = !std::isfinite(r.loss_sum);
  if ((logged || diverged || !applied) && loop.on_step) {
    StepEvent ev =
        step_event(options_.rank, epoch, step, sync_step, r, sync_, step_start, loop.clock, loop.totals, loop.start);
    if (scaler.active()) {
      ev.loss_scale = loss_scale;
      ev.skipped = !applied;
    }
    loop.on_step(ev);
  }
  // Nothing useful comes after a non-finite loss (the weights are NaN from here on), so a diverged run stops now with
  // the reason instead of burning its remaining epochs. With loss scaling such a step is skipped instead, and only a
  // run that skips step after step ends (LossScaler::update).
  if (diverged && !scaler.active()) {
    throw Error("training diverged: the loss of step " + std::to_string(step) + " (epoch " + std::to_string(epoch) +
                ") is not finite at learning rate " + std::to_string(sync_.lr_at(sync_step)) +
                "; lower optimizer.lr, or raise lr_schedule.warmup_steps");
  }
  return true;
}

void Trainer::train_claimed(Loop& loop, int64_t epoch, int64_t* step, WorkerEpochReport& report) {
  // A few batches a claim: a round trip to the coordinator every kClaim steps, and at an epoch's end the workers
  // finish within kClaim of one another's batches.
  constexpr uint32_t kClaim = 8;
  data::BatchLoader& loader = *loop.loader;
  loader.start_epoch(epoch - 1);
  const int64_t batches = loader.steps_per_epoch();
  for (;;) {
    ClaimedBatches claim;
    {
      ScopedPhase waiting(WorkerPhase::kCommWait);
      claim = options_.claim_batches(epoch, batches, kClaim);
    }
    if (claim.count <= 0) return;
    if (claim.first < 0 || claim.count > kClaim || claim.first + claim.count > batches) {
      throw Error("epoch " + std::to_string(epoch) + ": granted batches [" + std::to_string(claim.first) + ", " +
                  std::to_string(claim.first + claim.count) + ") of " + std::to_string(batches));
    }
    loader.take_steps(claim.first, claim.first + claim.count);
    for (int64_t i = 0; i < claim.count; ++i, ++*step) {
      if (!train_step(loop, epoch, *step, report)) return;
    }
  }
}

void Trainer::end_epoch_report(Loop& loop, WorkerEpochReport& report, int64_t first_step, int64_t step,
                               int64_t skipped_before) {
  const LossScaler& scaler = options_.loss_scaler;
  end_epoch(&report, loop.epoch_start, first_step, step, step - scaler.skipped(), sync_, loop.clock, loop.totals,
            loop.trace);
  if (scaler.active()) {
    report.has_loss_scale = true;
    report.loss_scale = scaler.scale();
    report.skipped_steps = scaler.skipped() - skipped_before;
  }
  if (options_.eval) {
    const auto eval_start = Clock::now();
    sync_.sync_all();
    evaluate(&report, step - scaler.skipped());
    report.eval_s = seconds_since(eval_start);
  }
  report.wall_s = seconds_since(loop.start);
  if (loop.on_epoch) loop.on_epoch(report);
}

void Trainer::run(const std::function<void(const StepEvent&)>& on_step,
                  const std::function<void(const WorkerEpochReport&)>& on_epoch) {
  const bool elastic = static_cast<bool>(options_.plan_epoch);
  Loop loop(tracer_, model_, on_step, on_epoch);
  auto make_loader = [this, &loop] {
    loop.loader.reset();
    loop.loader = std::make_unique<data::BatchLoader>(
        data_.train,
        options_.worker_batches.empty()
            ? data::ShardSampler(data_.train.size(), shard_, shards_, options_.seed)
            : data::ShardSampler(data_.train.size(), shard_, options_.worker_batches, options_.seed),
        batch_, options_.prefetch);
  };
  const bool claimed = static_cast<bool>(options_.claim_batches);
  if (claimed) {  // the epoch's batches of every worker, each taken when claimed
    loop.loader = std::make_unique<data::BatchLoader>(
        data_.train, data::ShardSampler(data_.train.size(), 0, 1, options_.seed), batch_, options_.prefetch);
  } else if (!elastic) {
    make_loader();
  }
  const bool classification = data_.train.num_classes > 0;
  sync_.start(model_);
  if (options_.joining) {
    // A joining worker's first pulls were joins: once answered, the servers count it from its first step on, and
    // the plan's other members may start.
    sync_.sync_all();
    if (options_.joined) options_.joined(options_.joining->epoch);
  }
  LossScaler& scaler = options_.loss_scaler;
  // A resumed run's scaler continues where the run left it (TrainerOptions::skipped_before): its data position is the
  // resume step plus the steps the run skipped before it.
  const bool replayed = options_.start_step > 0 && scaler.active() && options_.skipped_before && !options_.joining;
  if (replayed) scaler.replay(*options_.skipped_before, options_.start_step);
  const int64_t first_data_step = options_.start_step + scaler.skipped();
  int64_t step = first_data_step;
  // A run resumed at its very end (a server restarted after the last step) still evaluates and reports its last
  // epoch, with no samples trained, so that the resumed part of the run's records ends in an epoch and a summary.
  const bool at_end = step > 0 && step == options_.epochs * steps_per_epoch_;
  const int64_t first_epoch = options_.joining ? options_.joining->epoch
                              : at_end         ? options_.epochs
                                               : step / steps_per_epoch_ + 1;
  for (int64_t epoch = first_epoch; epoch <= options_.epochs; ++epoch) {
    int64_t steps = steps_per_epoch_;
    if (elastic) {
      const std::optional<EpochPlan> p = plan(epoch, step, epoch == first_epoch);
      if (!p) break;  // the job ended before this epoch began
      steps = steps_per_epoch_for(data_.train.size(), static_cast<uint32_t>(shards_), batch_);
      if (options_.on_plan) options_.on_plan(*p, steps, batch_);
      make_loader();
    }
    WorkerEpochReport report = new_epoch_report(options_.rank, epoch, classification);
    if (options_.simulate_compute_ms > 0) {  // sleeps stand in for forward and backward: no training loss or accuracy
      report.has_train_loss = report.has_train_acc = false;
    }
    loop.epoch_start = mark(sync_, loop.clock, loop.totals);
    const int64_t epoch_first_step = step;
    const int64_t skip =
        epoch == first_epoch && !elastic && !claimed ? first_data_step - (epoch - 1) * steps_per_epoch_ : 0;
    if (!claimed) {
      loop.loader->start_epoch(epoch - 1);
      for (int64_t i = 0; i < skip && !at_end; ++i) {  // resume: batches the run before the checkpoint consumed
        if (!loop.loader->next(&loop.batch)) {
          throw Error("data loader ended early while skipping to step " + std::to_string(step));
        }
      }
    }
    // The skips of this epoch count from its start: a resumed epoch's include those before the resume step.
    int64_t epoch_skipped = scaler.skipped();
    if (replayed && epoch == first_epoch) {
      const auto& before = *options_.skipped_before;
      epoch_skipped =
          static_cast<int64_t>(std::distance(before.begin(), before.lower_bound((epoch - 1) * steps_per_epoch_)));
    }
    const int64_t late_before = sync_.stats().late_steps;
    if (claimed && !at_end) train_claimed(loop, epoch, &step, report);
    for (int64_t i = skip; !claimed && i < steps && train_step(loop, epoch, step, report); ++i, ++step) {
      // Backup workers: a late worker's gradients went to the servers' step; it skips the batches up to it (within
      // the epoch, whose end every worker reports).
      const int64_t behind = std::min(sync_.pushed_step(step) - step, steps - 1 - i);
      for (int64_t k = 0; k < behind; ++k) {
        ScopedPhase data(WorkerPhase::kData);
        if (!loop.loader->next(&loop.batch)) throw Error("data loader ended early at step " + std::to_string(step));
      }
      if (behind > 0) {
        i += behind;
        step += behind;
        report.caught_up_steps += behind;
      }
    }
    if (stopped_at_ >= 0) break;  // the epoch is not over: a resumed run reports it
    if (options_.backup_workers) {
      report.has_late = true;
      report.late_steps = sync_.stats().late_steps - late_before;
    }
    if (ended_late_) {
      // The rest of the run's batches were trained by the others: this worker reports its epoch where it stopped,
      // with the run's last weights.
      report.caught_up_steps += total_steps() - step;
      sync_.catch_up(total_steps());
      end_epoch_report(loop, report, epoch_first_step, total_steps(), epoch_skipped);
      break;
    }
    end_epoch_report(loop, report, epoch_first_step, step, epoch_skipped);
  }
  if (!ended_late_) sync_.sync_all();
}

void Trainer::evaluate(WorkerEpochReport* report, int64_t step) {
  // Each worker evaluates a disjoint shard (i % world == rank); the shards
  // cover the whole test set, so the combined numbers are exact.
  const int64_t eval_batch = std::max<int64_t>(options_.batch_size, 256);
  std::vector<int64_t> shard = data::eval_shard(data_.test.size(), shard_, shards_);
  data::BatchLoader loader(data_.test, shard, eval_batch, /*prefetch_depth=*/1);
  loader.start_epoch(0);
  data::Batch batch;
  // Click data: each sample's score (the logit of a click: class 1's minus class 0's) and label, for the AUC.
  const bool clicks = data_.test.id_fields > 0 && data_.test.num_classes == 2;
  std::vector<float> scores, labels, truth;  // truth: the generator's probability of each (synthetic-ctr)
  const bool known = clicks && !data_.test.click_prob.empty();
  for (int64_t i : shard) {
    if (known) truth.push_back(data_.test.click_prob[static_cast<size_t>(i)]);
  }
  while (loader.next(&batch)) {
    if (rows_) {  // the rows of the weights just synced (read at the step they are of; nothing is pushed)
      rows_->prepare(batch.ids.data(), batch.n);
      sync_.pull_rows(step, *rows_);
      sync_.wait_rows();
      rows_->gather(model_.embedding()->rows(batch.n));
    }
    models::StepResult r = model_.forward(batch.x.data(), batch.n, batch.labels.empty() ? nullptr : batch.labels.data(),
                                          batch.targets.empty() ? nullptr : batch.targets.data(), /*train=*/false);
    report->test_n += r.n;
    report->test_loss_sum += r.loss_sum;
    report->test_correct += r.correct;
    if (clicks) {
      std::vector<float> logits(static_cast<size_t>(batch.n * 2));
      model_.backend().download(logits.data(), model_.output().data(), logits.size() * sizeof(float));
      for (int64_t i = 0; i < batch.n; ++i) {
        scores.push_back(logits[static_cast<size_t>(2 * i + 1)] - logits[static_cast<size_t>(2 * i)]);
        labels.push_back(static_cast<float>(batch.labels[static_cast<size_t>(i)]));
      }
    }
  }
  if (clicks) {
    // The shard's AUC (exact; the epoch line weighs the workers' by their test samples) and its log loss.
    std::vector<float> probs(scores.size());
    for (size_t i = 0; i < scores.size(); ++i) probs[i] = 1.0f / (1.0f + std::exp(-scores[i]));
    report->figures["test_auc"] = auc(scores.data(), labels.data(), scores.size());
    report->figures["test_logloss"] = log_loss(probs.data(), labels.data(), probs.size());
    if (known) report->figures["test_auc_bound"] = auc(truth.data(), labels.data(), truth.size());
  }
  report->evaluated = true;
}

}  // namespace pshard::trainer
