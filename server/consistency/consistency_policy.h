// The consistency policy of one slice: when it may be read, what a push does to it, what a dead worker changes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/protocol/codec.h"
#include "server/consistency/consistency_mode.h"

namespace pshard {

// What the pushes of a BSP step asked for when it closes: a checkpoint at the step boundary (checkpoint flag:
// checkpoint.every_seconds), the job's stop there (stop flag: checkpoint.on_sigterm), which also checkpoints, and
// that the step be skipped (skipped flag: a worker's gradients were not finite under train.loss_scaling): then it
// closes without an update, and the same step opens again with the other two asks still standing.
struct StepRequests {
  bool checkpoint = false;
  bool stop = false;
  bool skip = false;
};

// The slice a policy decides for, as the policy sees it (implemented by the slice store).
class ConsistencySlice {
 public:
  virtual ~ConsistencySlice() = default;
  virtual bool initialized() const = 0;  // worker 0's init (or a checkpoint) has given it weights
  virtual uint64_t length() const = 0;   // floats
  virtual int64_t version() const = 0;   // BSP: steps closed; ASP/SSP: pushes applied
  // The optimizer on `gradient` (length() floats, the mean of `workers` workers' gradients) at the learning rate of
  // step `lr_step`; version() + 1. An elastic job's learning rate follows `workers` (the linear scaling rule).
  virtual void apply(const float* gradient, int64_t lr_step, uint32_t workers) = 0;
  // BSP: a step has just closed; `asked`: what its pushes asked for (a checkpoint, the stop).
  virtual void step_closed(StepRequests asked) = 0;
  virtual std::string name() const = 0;  // e.g. "fc1.weight slice 0", for error messages
};

// The workers a push speaks for: their ranks in increasing order, the sender first. One rank, unless the workers of a
// host summed their gradients before sending them (cluster.host_aggregation; sync jobs only).
using Contributors = std::vector<uint32_t>;

// Workers declared dead, by rank, as the calling thread knows them (each thread keeps its own view).
using DeadWorkers = std::vector<char>;

// A refused push: the error reply's code and text; code NONE when the push was taken. `dropped`: taken but not
// applied, because its step had closed without it (BSP with backup workers); the reply says so (late).
struct PushResult {
  protocol::ErrorCode code = protocol::ErrorCode::NONE;
  std::string why;
  bool dropped = false;
  bool ok() const { return code == protocol::ErrorCode::NONE; }
};

using PolicyClock = std::chrono::steady_clock;

// One object per slice, called only on the slice's owner thread. `scratch` is that thread's buffer for
// gradients that arrive unaligned (see aligned_floats).
//
//   auto policy = make_consistency_policy({Consistency::kBsp, num_workers, 0}, slice);
//   PushResult r = policy->on_push({rank}, step, StepRequests{}, std::move(payload), dead, scratch);
//   if (policy->ready(step + 1, dead)) reply_with_weights();
class ConsistencyPolicy {
 public:
  virtual ~ConsistencyPolicy() = default;
  // May a reader at step/clock `step` be answered now? (The slice is initialized.)
  virtual bool ready(int64_t step, const DeadWorkers& dead) const = 0;
  // BSP: the step before `step` closed skipped (StepRequests::skip) and has not opened again yet: a ready() reader
  // at `step` is answered with the weights of step - 1 and told so.
  virtual bool skipped_before(int64_t /*step*/) const { return false; }
  // The gradient of the workers `from` (their sum) for step/clock `step`; the policy keeps it (BSP, out of rank order)
  // or releases it once applied. `asks`: what the worker asks for when this step closes (BSP). ASP and SSP refuse a
  // push from more than one worker, and one that asks to skip its step (a sync job's flag).
  virtual PushResult on_push(const Contributors& from, int64_t step, StepRequests asks,
                             std::shared_ptr<zmq::message_t> gradient, const DeadWorkers& dead,
                             std::vector<float>& scratch) = 0;
  // `rank` was declared dead (it is set in `dead`): an open BSP step may close without it.
  virtual void on_worker_dead(uint32_t rank, const DeadWorkers& dead, std::vector<float>& scratch) = 0;
  // A dead worker rejoins at `step`: "" when accepted (counted again from `step`), else why not.
  virtual std::string on_join(uint32_t rank, int64_t step) = 0;
  // The live workers whose pushes a reader at `step` still waits for (empty when ready), in rank order: what a
  // stalled step names.
  virtual std::vector<uint32_t> missing(int64_t step, const DeadWorkers& dead) const = 0;
  // When the open step closes without the pushes still missing (BSP with backup workers, once enough came); none:
  // it waits for every push.
  virtual std::optional<PolicyClock::time_point> close_by() const { return std::nullopt; }
  // The clock reached `now`: closes the open step if close_by() has passed.
  virtual void on_clock(PolicyClock::time_point /*now*/, const DeadWorkers& /*dead*/, std::vector<float>& /*scratch*/) {
  }
};

// BSP's backup workers (cluster.backup_workers): a step closes once all but `count` of the live workers pushed and
// a grace has passed since, the grace being `grace_share` of the recent step time and at least `grace_min`.
struct BackupWorkers {
  uint32_t count = 0;
  double grace_share = 0.1;
  std::chrono::microseconds grace_min{std::chrono::milliseconds(2)};
};

struct ConsistencyParams {
  Consistency mode = Consistency::kBsp;
  uint32_t num_workers = 1;
  int64_t staleness = 2;  // kSsp only
  BackupWorkers backup;   // kBsp only
};

// The policy of `params.mode` for `slice` (which must outlive it), with no push seen yet.
std::unique_ptr<ConsistencyPolicy> make_consistency_policy(const ConsistencyParams& params, ConsistencySlice& slice);

// The floats of a payload frame: in place when aligned, else copied into `scratch`.
const float* aligned_floats(const zmq::message_t& m, std::vector<float>& scratch);

}  // namespace pshard
