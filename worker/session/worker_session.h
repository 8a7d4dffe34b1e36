// One worker's part in its job, the same for pshard's own worker (worker/worker_process.cc) and the C API
// (worker/capi/): its registration, the job's events, its KV client, where it starts in the run (fresh, resumed,
// rejoining, joining) and an elastic job's epoch plans. The front ends keep what is their own: the training loop, or
// the C API's status codes, argument checks, handles and tensor list.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/config/job_shape.h"
#include "common/control/cluster_client.h"
#include "common/error.h"
#include "common/metrics/trace.h"
#include "optim/lr_policy.h"
#include "worker/client/kv_client.h"
#include "worker/session/job_events.h"

namespace pshard {

// Where a worker starts in its run.
enum class StartKind {
  kFresh,     // at step 0 (or an elastic epoch's first step, as one of the job's first members)
  kResumed,   // at a resumed run's step (--start-step, PSHARD_START_STEP): the servers restored that checkpoint
  kRejoined,  // restarted in place of itself (--join, PSHARD_REJOIN): a few steps after the servers' step
  kJoined,    // registered with an elastic job already running: at the next epoch's first step
};

// What the front end was asked to do.
struct StartRequest {
  int64_t resume_step = 0;  // > 0: a resumed run's first step
  bool rejoin = false;      // restarted by the launcher: takes its rank back in the running job
  std::string run_dir;      // the run directory (a resumed compressed run's residual files); empty: none
  // A program that scales its loss (a GradScaler) and may skip steps, as train.loss_scaling makes pshard's own
  // workers: every push is this worker's own, never part of its host's sum (a step it skips in a sync job is said by
  // its own pushes, KvClient::request_skip; refused, StartRefused, with cluster.host_aggregation = always), and in an
  // async or SSP job, where it skips steps alone, its pushed-step count is not compared with the others' at its leave.
  bool scales_loss = false;
};

// A start the job cannot take (an elastic job restarted or resumed, a resume past the run's end): the front end's
// argument, not a failure of the servers (the C API answers PSHARD_ERR_STATE).
class StartRefused : public Error {
 public:
  using Error::Error;
};

// Thread-safe where ClusterClient, KvClient and JobEvents are; start() and close_kv() are called by one thread.
//
//   WorkerSession worker(cfg, copt);                    // registers; throws what ClusterClient throws
//   if (!worker.start(tensors, total_steps, request))  // a joiner that came too late: leave with status 0
//     ...
//   worker.kv().push_pull(...);
class WorkerSession {
 public:
  // Registers with the coordinator as `copt` says and records the job's events from then on; `on_abort` (optional)
  // runs on the cluster client's thread at the job's abort (JobEvents::listen).
  WorkerSession(const Config& cfg, const ClusterClient::Options& copt,
                std::function<void(const std::string& reason)> on_abort = nullptr);
  ~WorkerSession();  // the KV client's threads stop before the cluster client says goodbye
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  ClusterClient& cluster() { return *cluster_; }
  const ClusterClient& cluster() const { return *cluster_; }
  JobEvents& events() { return events_; }
  const JobEvents& events() const { return events_; }
  uint32_t rank() const { return cluster_->rank(); }
  bool elastic() const { return cluster_->map().elastic(); }
  // The job's shape (its mode, failure policies, transport, device, precision: common/config/job_shape.h), read once
  // from the config the worker registered with.
  const JobShape& job() const { return job_; }
  // The job's learning-rate policy, read once from the config (the servers apply it; optim/lr_policy.h).
  const optim::LrPolicy& lr_policy() const { return lr_; }
  // The workers a step's global batch is made of at first: an elastic job's fewest (its epochs then train with
  // whichever workers are in them), otherwise all.
  uint32_t first_world() const;

  // Decides where this worker starts in a run of `total_steps` (0: its length is not known) and makes its KV client
  // for `tensors`:
  // - a worker that registered with a running elastic job waits for the next epoch's start (at most until the job
  //   ends) and trains from its first step; false when the job ended first: the worker did not train and leaves with
  //   status 0;
  // - a restarted worker rejoins at a step boundary the running workers have not reached (the servers' step +
  //   kRejoinMargin, at most the run's end), which it tells the coordinator;
  // - a resumed run starts at request.resume_step and takes back a compressed job's residuals.
  // Throws StartRefused for a start the job cannot take, before anything is sent to the servers. The learning rate
  // reported (lr_at) follows the global batch of first_world() workers from here on.
  bool start(const std::vector<TensorSpec>& tensors, int64_t total_steps, const StartRequest& request);

  bool started() const { return kv_ != nullptr; }
  KvClient& kv() { return *kv_; }
  const KvClient& kv() const { return *kv_; }
  // Stops the KV client's threads (a front end whose buffers the I/O thread writes frees them after this); kv() is
  // gone afterwards.
  void close_kv() { kv_.reset(); }

  StartKind start_kind() const { return kind_; }
  int64_t start_step() const { return start_step_; }
  // Rejoined or joined: the servers count this worker again from its first pull of each tensor at start_step().
  bool counted_from_start() const { return kind_ == StartKind::kRejoined || kind_ == StartKind::kJoined; }
  // A joiner's first epoch (nullopt for the others).
  const std::optional<EpochPlan>& joined_with() const { return joined_with_; }

  // The learning rate this worker reports at `step`: the job's policy for the global batch it trains in (first_world()
  // workers' from start(), an elastic epoch's members' from follow_members()), as the servers apply it. After start().
  double lr_at(int64_t step) const;
  // Elastic jobs: the epoch's `members` make the global batch from now on (LrPolicy::batch_workers, as the servers'
  // follows the workers whose gradients each update holds).
  void follow_members(uint32_t members);

  // Elastic jobs: the plan of `epoch` (1-based), entered at `step`: waits for the members of the epoch before to
  // finish it, and for workers to join while fewer than cluster.min_workers are left (at most
  // cluster.request_timeout_ms + cluster.rendezvous_timeout_ms). nullopt when the job ended first. Its members are
  // live from then on (JobEvents::members_are_live).
  std::optional<EpochPlan> enter_epoch(int64_t epoch, int64_t step);
  // cluster.batch_assignment = dynamic: the next at most `count` of the `batches` batches of `epoch` for this worker
  // (ClusterClient::claim_batches, waiting at most cluster.request_timeout_ms).
  ClusterClient::BatchGrant claim_batches(int64_t epoch, int64_t batches, uint32_t count);
  // The epoch's lowest member logs its plan and reports it (the "members" event); the others do nothing. `steps`: the
  // epoch's steps (-1: not known, a program's); `lr`: the learning rate at the plan's first step; `note`: said after
  // the global batch.
  void announce_epoch(const EpochPlan& plan, int64_t batch, int64_t global_batch, int64_t steps, double lr,
                      const std::string& note = std::string());

  // The end of this worker's part, with `status` (0: done; kExitStopped: stopped at a checkpoint; else failed) and
  // `why`: writes its timeline when `tracer` is given (RUN_DIR/trace/worker-R.json, the run directory start() was
  // given), stops the KV client and says goodbye to the coordinator with the steps it pushed (steps_to_tell). Once.
  void leave(int status, const std::string& why = "", const Tracer* tracer = nullptr);

 private:
  const Config cfg_;
  const JobShape job_;
  const optim::LrPolicy lr_;
  std::optional<optim::LrSchedule> schedule_;  // start()'s, then each elastic epoch's
  int64_t total_steps_ = 0;                    // start()'s
  bool scales_loss_ = false;                   // start()'s: the program or train.loss_scaling may skip steps
  JobEvents events_;  // before cluster_: its thread records into events_ until ~ClusterClient joins it
  ClusterClient::Options registered_;
  std::unique_ptr<ClusterClient> cluster_;
  std::unique_ptr<KvClient> kv_;
  StartKind kind_ = StartKind::kFresh;
  int64_t start_step_ = 0;
  std::optional<EpochPlan> joined_with_;
  std::string run_dir_;  // start()'s
  bool left_ = false;
};

// The refusals of start(), as one function: an elastic job restarted or resumed (its epochs' members are not
// recorded in the checkpoints), a resume past the run's end (`total_steps` > 0).
void check_start(bool elastic, const StartRequest& request, int64_t total_steps);

// The steps a leaving worker tells the coordinator it pushed, which compares the workers' counts to tell one that left
// early from those that went on: its highest pushed step + 1, at least its start step (a resumed worker that pushed
// nothing more); -1 (not told) when it never started, or when the workers push different steps: in an elastic job
// (`varying` true), whose members train different steps, with backup workers, whose stragglers skip steps, in an
// async or SSP job with loss scaling, whose workers skip their overflowed steps alone, and with dynamic batch
// assignment, whose workers train as many batches as they claim.
int64_t steps_to_tell(bool started, bool varying, int64_t start_step, int64_t kv_pushed);

}  // namespace pshard
