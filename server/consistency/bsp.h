// BSP (cluster.mode = sync): the pushes of a step are summed in rank order and their mean applied once.
#pragma once

#include "server/consistency/consistency_policy.h"

namespace pshard {

// A slice's open step: contributions are summed in rank order as far as they are contiguous (so the sum, and the
// weights, are the same whatever order the pushes arrive in); the step closes when every live worker has pushed.
// A dead worker is skipped; one that rejoined at step j counts again from step j.
//
// Backup workers (cluster.backup_workers = b): once all but b live workers pushed, the step also closes when a grace
// has passed (on_clock), with the mean of the gradients it has, summed in rank order. A push that comes for a step
// already closed is taken and dropped (PushResult::dropped): its worker is late, and what it asked for (a checkpoint,
// the stop) moves to the open step. When every push comes within the grace, the step is the one b = 0 would close,
// bit for bit.
//
// Loss scaling (a push with StepRequests::skip): the step closes as usual, once every live worker pushed, but applies
// nothing; its readers get the unchanged weights (skipped_before), and the workers push the same step again. Every
// slice sees the same pushes' flags, so every slice skips the same steps without a word between them.
class BspPolicy final : public ConsistencyPolicy {
 public:
  BspPolicy(ConsistencySlice& slice, uint32_t num_workers, BackupWorkers backup = {});

  bool ready(int64_t step, const DeadWorkers& dead) const override;  // version >= step, or skipped_before(step)
  bool skipped_before(int64_t step) const override;
  PushResult on_push(const Contributors& from, int64_t step, StepRequests asks,
                     std::shared_ptr<zmq::message_t> gradient, const DeadWorkers& dead,
                     std::vector<float>& scratch) override;
  void on_worker_dead(uint32_t rank, const DeadWorkers& dead, std::vector<float>& scratch) override;
  std::string on_join(uint32_t rank, int64_t step) override;
  std::vector<uint32_t> missing(int64_t step, const DeadWorkers& dead) const override;  // not pushed the open step
  std::optional<PolicyClock::time_point> close_by() const override;  // backup workers: quorum + grace
  void on_clock(PolicyClock::time_point now, const DeadWorkers& dead, std::vector<float>& scratch) override;

 private:
  void advance(const DeadWorkers& dead, std::vector<float>& scratch);
  bool counted(uint32_t rank, const DeadWorkers& dead) const;
  void note_quorum(const DeadWorkers& dead);  // backup workers: starts the grace once enough workers pushed

  ConsistencySlice& slice_;
  const uint32_t num_workers_;
  std::vector<std::shared_ptr<zmq::message_t>> pending_;  // per rank, received but not yet summed (a host's sum: at
                                                          // its first contributor)
  std::vector<uint32_t> weight_;                          // per rank with a pending payload: the workers it sums
  std::vector<char> pushed_;                              // per rank: pushed this step (alone or in a host's sum)
  uint32_t next_rank_ = 0;                                // next rank to sum
  uint32_t contributions_ = 0;                            // workers summed so far
  uint32_t payloads_ = 0;                                 // payloads summed so far
  std::shared_ptr<zmq::message_t> first_;                 // the only contribution so far (summed lazily, no copy)
  std::vector<float> acc_;                                // sum of >= 2 contributions
  std::vector<int64_t> join_step_;  // per rank, the step from which a rejoined worker counts; -1: none
  StepRequests asked_;              // what the pushes of the open step asked for when it closes
  bool reopened_ = false;           // the last close skipped its step, which no push has opened again yet
  // Backup workers: how many, the open step's pushes (workers) so far, when it opened and when enough had pushed,
  // the recent step time (open to quorum, a moving average) and whether the step is closing without the rest.
  const BackupWorkers backup_;
  uint32_t pushed_workers_ = 0;
  PolicyClock::time_point opened_ = PolicyClock::now();
  std::optional<PolicyClock::time_point> quorum_at_;
  double step_s_ = -1;  // < 0: no step closed yet
  bool closing_ = false;
};

}  // namespace pshard
