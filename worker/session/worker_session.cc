// WorkerSession: a worker's registration, start and epoch plans, one behaviour for both front ends.
#include "worker/session/worker_session.h"

#include <algorithm>
#include <chrono>

#include "common/util/json.h"
#include "common/util/log.h"

namespace pshard {

void check_start(bool elastic, const StartRequest& request, int64_t total_steps) {
  if (elastic && (request.rejoin || request.resume_step > 0)) {
    throw StartRefused(
        std::string("an elastic job (cluster.min_workers > 0) cannot be ") +
        (request.rejoin ? "restarted" : "resumed (start step " + std::to_string(request.resume_step) + ")") +
        ": its epochs' members are not recorded in the checkpoints; workers join it as new ones "
        "(pshard join)");
  }
  if (!request.rejoin && total_steps > 0 && request.resume_step > total_steps) {
    throw StartRefused("the run resumes at step " + std::to_string(request.resume_step) + ", past its end (" +
                       std::to_string(total_steps) + " steps)");
  }
}

int64_t steps_to_tell(bool started, bool varying, int64_t start_step, int64_t kv_pushed) {
  if (!started || varying) return -1;
  return std::max(start_step, kv_pushed);
}

WorkerSession::WorkerSession(const Config& cfg, const ClusterClient::Options& copt,
                             std::function<void(const std::string&)> on_abort)
    : cfg_(cfg),
      job_(JobShape::from_config(cfg)),
      lr_(optim::LrPolicy::from_config(cfg)),
      registered_(copt),
      cluster_(std::make_unique<ClusterClient>(copt)) {
  events_.listen(*cluster_, std::move(on_abort));
}

WorkerSession::~WorkerSession() {
  kv_.reset();
  cluster_.reset();  // joins the client's thread while events_ still exists
}

uint32_t WorkerSession::first_world() const {
  return elastic() ? cluster_->map().min_workers : cluster_->map().num_workers;
}

bool WorkerSession::start(const std::vector<TensorSpec>& tensors, int64_t total_steps, const StartRequest& request) {
  if (kv_) throw Error("pshard worker: WorkerSession::start called twice");
  check_start(elastic(), request, total_steps);
  schedule_.emplace(lr_.schedule(first_world(), total_steps));
  total_steps_ = total_steps;
  if (elastic() && cluster_->joins_running()) {
    // Waits before the KV client exists: the servers count a joiner from its epoch's first step, not before.
    PSHARD_LOG(kInfo) << "joined the running job: it trains from the next epoch's start";
    joined_with_ = cluster_->enter_epoch(0, -1, std::chrono::hours(24 * 365));
    if (!joined_with_) {
      PSHARD_LOG(kInfo) << "the job ended before another epoch began: this worker joined too late to train";
      return false;
    }
    events_.members_are_live(joined_with_->members);
    kind_ = StartKind::kJoined;
    start_step_ = joined_with_->first_step;
  }
  run_dir_ = request.run_dir;
  KvClientOptions kv_options =
      KvClientOptions::from_config(cfg_, *cluster_, registered_, tensors, total_steps, request.run_dir);
  scales_loss_ = request.scales_loss || job_.scales_loss();
  if (request.scales_loss) {
    if (job_.host_aggregation == "always") {
      throw StartRefused(
          "cluster.host_aggregation = always sums the pushes of a host's workers, but this worker scales its loss and "
          "says itself which steps to skip: set cluster.host_aggregation = auto or off");
    }
    kv_options.host_ranks.clear();  // auto: the host's workers, which all scale their loss, push their own
    kv_options.host_aggregated.clear();
  }
  kv_ = std::make_unique<KvClient>(std::move(kv_options));
  if (kind_ == StartKind::kJoined) return true;
  if (request.rejoin) {
    // The servers refuse the rejoin (badStep) if they got there first.
    kind_ = StartKind::kRejoined;
    start_step_ = kv_->servers_step() + kRejoinMargin;
    if (total_steps > 0) start_step_ = std::min(start_step_, total_steps);
    PSHARD_LOG(kInfo) << "rejoining the job at step " << start_step_
                      << (total_steps > 0 ? " of " + std::to_string(total_steps) : std::string());
    // The coordinator then expects this worker's epoch reports only from the epoch it rejoins in on.
    cluster_->tell(ClusterClient::JobFact::kRejoined, start_step_);
  } else if (request.resume_step > 0) {
    kind_ = StartKind::kResumed;
    start_step_ = request.resume_step;
    const std::string zero = kv_->restore_residuals(start_step_);  // a resumed compressed run
    if (!zero.empty()) PSHARD_LOG(kWarn) << zero;
  }
  return true;
}

double WorkerSession::lr_at(int64_t step) const {
  if (!schedule_) throw Error("pshard worker: the learning rate is known after WorkerSession::start");
  return schedule_->lr_at(step);
}

void WorkerSession::follow_members(uint32_t members) {
  schedule_.emplace(lr_.schedule(lr_.batch_workers(members, members), total_steps_));
}

std::optional<EpochPlan> WorkerSession::enter_epoch(int64_t epoch, int64_t step) {
  const std::chrono::milliseconds wait(cfg_.get_int("cluster.request_timeout_ms") +
                                       cfg_.get_int("cluster.rendezvous_timeout_ms"));
  std::optional<EpochPlan> plan = cluster_->enter_epoch(epoch, step, wait);
  if (plan) events_.members_are_live(plan->members);
  return plan;
}

ClusterClient::BatchGrant WorkerSession::claim_batches(int64_t epoch, int64_t batches, uint32_t count) {
  return cluster_->claim_batches(epoch, batches, count,
                                 std::chrono::milliseconds(cfg_.get_int("cluster.request_timeout_ms")));
}

void WorkerSession::announce_epoch(const EpochPlan& plan, int64_t batch, int64_t global_batch, int64_t steps, double lr,
                                   const std::string& note) {
  if (plan.members.empty() || rank() != plan.members.front()) return;  // one worker says it
  const bool linear = lr_.shape.scaling == "linear";
  PSHARD_LOG(kInfo) << "epoch " << plan.epoch << ": " << plan.members.size() << " workers x batch " << batch
                    << " = global batch " << global_batch << note << ", "
                    << (steps >= 0 ? std::to_string(steps) + " steps " : std::string()) << "from step "
                    << plan.first_step << ", learning rate " << lr << (linear ? " (linear scaling rule)" : "");
  Json ranks = Json::array();
  for (uint32_t r : plan.members) ranks.push(r);
  Json event = Json::object().set("event", "members").set("epoch", plan.epoch).set("first_step", plan.first_step);
  if (steps >= 0) event.set("steps", steps);
  cluster_->report(event.set("workers", ranks).set("batch", batch).set("global_batch", global_batch).set("lr", lr));
}

void WorkerSession::leave(int status, const std::string& why, const Tracer* tracer) {
  if (left_) return;
  left_ = true;
  const int64_t pushed = steps_to_tell(
      started(), elastic() || job_.has_backup_workers() || (scales_loss_ && !job_.sync()) || job_.dynamic_batches,
      start_step_, kv_ ? kv_->steps_pushed() : 0);
  close_kv();  // stops the I/O thread before the cluster client says goodbye
  if (tracer && !run_dir_.empty()) {
    write_trace_file(*tracer, run_dir_, "worker-" + std::to_string(rank()), cluster_->clock_offset());
  }
  cluster_->leave(status, why, pushed);
}

}  // namespace pshard
