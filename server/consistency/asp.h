// ASP (cluster.mode = async): each push is applied on arrival; a pull returns the current weights.
#pragma once

#include "server/consistency/consistency_policy.h"

namespace pshard {

class AspPolicy : public ConsistencyPolicy {
 public:
  explicit AspPolicy(ConsistencySlice& slice) : slice_(slice) {}

  bool ready(int64_t step, const DeadWorkers& dead) const override;  // always
  // Applies the gradient at the learning rate of the worker's step.
  PushResult on_push(const Contributors& from, int64_t step, StepRequests asks,
                     std::shared_ptr<zmq::message_t> gradient, const DeadWorkers& dead,
                     std::vector<float>& scratch) override;
  void on_worker_dead(uint32_t rank, const DeadWorkers& dead, std::vector<float>& scratch) override;  // nothing
  std::string on_join(uint32_t rank, int64_t step) override;  // refused: there are no steps to join at
  std::vector<uint32_t> missing(int64_t, const DeadWorkers&) const override { return {}; }  // never waits

 protected:
  ConsistencySlice& slice_;
};

}  // namespace pshard
