// SSP (cluster.mode = ssp): pushes as in ASP; a reader at clock c waits until the slowest live worker reached c - s.
#pragma once

#include "server/consistency/asp.h"

namespace pshard {

// A worker's clock is the number of steps this slice has seen it push (its step + 1). Dead workers are not waited
// for; with every worker dead, reads are answered.
class SspPolicy final : public AspPolicy {
 public:
  SspPolicy(ConsistencySlice& slice, uint32_t num_workers, int64_t staleness);

  bool ready(int64_t step, const DeadWorkers& dead) const override;  // slowest live clock >= step - staleness
  PushResult on_push(const Contributors& from, int64_t step, StepRequests asks,
                     std::shared_ptr<zmq::message_t> gradient, const DeadWorkers& dead,
                     std::vector<float>& scratch) override;
  std::vector<uint32_t> missing(int64_t step, const DeadWorkers& dead) const override;  // clocks below step - s

 private:
  const int64_t staleness_;
  std::vector<int64_t> clock_;  // per worker
};

}  // namespace pshard
