// BSP: sum in rank order, apply the mean once per step, close the step without dead workers.
#include "server/consistency/bsp.h"

#include <algorithm>
#include <cstring>

#include "common/reduce/rank_sum.h"

namespace pshard {

using protocol::ErrorCode;

BspPolicy::BspPolicy(ConsistencySlice& slice, uint32_t num_workers, BackupWorkers backup)
    : slice_(slice),
      num_workers_(num_workers),
      pending_(num_workers),
      weight_(num_workers, 0),
      pushed_(num_workers, 0),
      join_step_(num_workers, -1),
      backup_(backup) {}

bool BspPolicy::ready(int64_t step, const DeadWorkers&) const {
  return slice_.version() >= step || skipped_before(step);
}

bool BspPolicy::skipped_before(int64_t step) const { return reopened_ && step == slice_.version() + 1; }

bool BspPolicy::counted(uint32_t rank, const DeadWorkers& dead) const {
  return !dead[rank] || (join_step_[rank] >= 0 && slice_.version() >= join_step_[rank]);
}

PushResult BspPolicy::on_push(const Contributors& from, int64_t step, StepRequests asks,
                              std::shared_ptr<zmq::message_t> gradient, const DeadWorkers& dead,
                              std::vector<float>& scratch) {
  for (uint32_t rank : from) {
    if (dead[rank] && join_step_[rank] < 0) {
      return {ErrorCode::WORKER_DEAD, "worker " + std::to_string(rank) + " was declared dead"};
    }
  }
  if (backup_.count > 0 && step >= 0 && step < slice_.version()) {  // late: the step closed without it
    asked_.checkpoint = asked_.checkpoint || asks.checkpoint;
    asked_.stop = asked_.stop || asks.stop;
    PushResult dropped;
    dropped.dropped = true;
    return dropped;
  }
  if (step != slice_.version()) {
    return {ErrorCode::BAD_STEP, "push of step " + std::to_string(step) + " for " + slice_.name() +
                                     ", which is at step " + std::to_string(slice_.version())};
  }
  for (uint32_t rank : from) {
    if (pushed_[rank]) {
      return {ErrorCode::DUPLICATE_PUSH, "worker " + std::to_string(rank) + " already pushed step " +
                                             std::to_string(step) + " of " + slice_.name()};
    }
  }
  for (uint32_t rank : from) pushed_[rank] = 1;
  reopened_ = false;  // the readers of a skipped step were answered with its close: from now on they wait again
  const uint32_t rank = from.at(0);
  pending_[rank] = std::move(gradient);
  weight_[rank] = static_cast<uint32_t>(from.size());
  pushed_workers_ += static_cast<uint32_t>(from.size());
  asked_.checkpoint = asked_.checkpoint || asks.checkpoint;
  asked_.stop = asked_.stop || asks.stop;
  asked_.skip = asked_.skip || asks.skip;
  advance(dead, scratch);
  note_quorum(dead);
  return {};
}

void BspPolicy::on_worker_dead(uint32_t rank, const DeadWorkers& dead, std::vector<float>& scratch) {
  join_step_[rank] = -1;  // a rejoined worker died again
  if (next_rank_ < num_workers_) advance(dead, scratch);
  note_quorum(dead);
}

void BspPolicy::note_quorum(const DeadWorkers& dead) {
  if (backup_.count == 0 || quorum_at_ || pushed_workers_ == 0) return;
  uint32_t live = 0;
  for (uint32_t r = 0; r < num_workers_; ++r) live += counted(r, dead) ? 1 : 0;
  if (pushed_workers_ + backup_.count >= live) quorum_at_ = PolicyClock::now();
}

std::optional<PolicyClock::time_point> BspPolicy::close_by() const {
  if (!quorum_at_) return std::nullopt;
  // The grace is a share of the recent step time: a worker later than that is a straggler, not jitter.
  const auto share = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::duration<double>(std::max(step_s_, 0.0) * backup_.grace_share));
  return *quorum_at_ + std::max(share, backup_.grace_min);
}

void BspPolicy::on_clock(PolicyClock::time_point now, const DeadWorkers& dead, std::vector<float>& scratch) {
  const std::optional<PolicyClock::time_point> by = close_by();
  if (!by || now < *by) return;
  closing_ = true;  // the ranks that did not push are skipped
  advance(dead, scratch);
  closing_ = false;
}

std::string BspPolicy::on_join(uint32_t rank, int64_t step) {
  if (!slice_.initialized()) return "the slice is not initialised";
  if (slice_.version() > step) return "the slice is already at step " + std::to_string(slice_.version());
  join_step_[rank] = step;
  return "";
}

std::vector<uint32_t> BspPolicy::missing(int64_t step, const DeadWorkers& dead) const {
  std::vector<uint32_t> ranks;
  if (ready(step, dead)) return ranks;
  for (uint32_t r = 0; r < num_workers_; ++r) {
    if (!pushed_[r] && counted(r, dead)) ranks.push_back(r);
  }
  return ranks;
}

// Sums contributions in rank order as far as they are contiguous (common/reduce/rank_sum.h, whose rounding contract
// a host's sum keeps); closes the step when every live worker has contributed. Summing in a fixed order keeps W
// workers bitwise equal to themselves run after run. A host's sum (cluster.host_aggregation) counts as its w workers.
void BspPolicy::advance(const DeadWorkers& dead, std::vector<float>& scratch) {
  const uint64_t length = slice_.length();
  bool averaged = false;  // the last addition also divided by the count
  while (next_rank_ < num_workers_) {
    const uint32_t r = next_rank_;
    if (pending_[r]) {
      const uint32_t w = weight_[r];
      if (payloads_ == 0) {
        first_ = std::move(pending_[r]);
      } else {
        // The last contribution of the step (every later rank has been summed into another's payload, is not
        // counted, or is pending) divides in the same pass: (sum + g) / n rounds exactly as a separate division of
        // the rounded sum.
        bool last = true;
        for (uint32_t later = r + 1; later < num_workers_ && last; ++later) {
          last = !pending_[later] && (pushed_[later] || !counted(later, dead) || closing_);
        }
        const uint32_t n = contributions_ + w;
        const float* g = aligned_floats(*pending_[r], scratch);
        if (payloads_ == 1) {  // the second payload: the sum starts as first + second, in one pass
          acc_.resize(length);
          std::vector<float> first_scratch;
          const float* f = aligned_floats(*first_, first_scratch);
          if (last) {
            reduce::sum_start_mean(f, g, acc_.data(), length, n);
          } else {
            reduce::sum_start(f, g, acc_.data(), length);
          }
          first_.reset();
        } else if (last) {
          reduce::sum_add_mean(acc_.data(), g, length, n);
        } else {
          reduce::sum_add(acc_.data(), g, length);
        }
        averaged = last;
        pending_[r].reset();
      }
      contributions_ += w;
      ++payloads_;
      ++next_rank_;
    } else if (pushed_[r] || !counted(r, dead) || closing_) {  // summed into a lower rank's payload, not counted,
      ++next_rank_;                                            // or late
    } else {
      return;
    }
  }
  if (contributions_ == 0) return;  // every worker is dead
  const int64_t step = slice_.version();
  if (asked_.skip) {  // loss scaling: some worker's gradients were not finite; the weights stay as they are
    first_.reset();
  } else if (contributions_ == 1) {
    slice_.apply(aligned_floats(*first_, scratch), step, contributions_);
    first_.reset();
  } else if (payloads_ == 1) {  // one host's sum: its mean
    acc_.resize(length);
    reduce::mean(aligned_floats(*first_, scratch), acc_.data(), length, contributions_);
    first_.reset();
    slice_.apply(acc_.data(), step, contributions_);
  } else {
    if (!averaged) {  // a worker died after the last contribution came in
      reduce::mean(acc_.data(), acc_.data(), length, contributions_);
    }
    slice_.apply(acc_.data(), step, contributions_);
  }
  contributions_ = 0;
  payloads_ = 0;
  next_rank_ = 0;
  std::fill(pushed_.begin(), pushed_.end(), 0);
  if (backup_.count > 0) {  // the step time: from its opening to the quorum (to its close when all came at once)
    const PolicyClock::time_point now = PolicyClock::now();
    const double took = std::chrono::duration<double>(quorum_at_.value_or(now) - opened_).count();
    step_s_ = step_s_ < 0 ? took : 0.75 * step_s_ + 0.25 * took;
    opened_ = now;
    quorum_at_.reset();
    pushed_workers_ = 0;
  }
  const StepRequests asked = asked_;
  asked_ = StepRequests{};
  if (asked.skip) {  // the same step opens again, and what its pushes asked for stands for it
    asked_.checkpoint = asked.checkpoint;
    asked_.stop = asked.stop;
    reopened_ = true;
    return;
  }
  slice_.step_closed(asked);
}

}  // namespace pshard
