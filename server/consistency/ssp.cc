// SSP: ASP updates plus per-worker clocks that bound how far a reader may run ahead of the slowest worker.
#include "server/consistency/ssp.h"

#include <algorithm>
#include <cstdint>

namespace pshard {

// Every clock starts at the slice's version: 0 after an init, the checkpoint's step after a restore.
SspPolicy::SspPolicy(ConsistencySlice& slice, uint32_t num_workers, int64_t staleness)
    : AspPolicy(slice), staleness_(staleness), clock_(num_workers, slice.version()) {}

bool SspPolicy::ready(int64_t step, const DeadWorkers& dead) const {
  int64_t slowest = INT64_MAX;
  for (size_t w = 0; w < clock_.size(); ++w) {
    if (!dead[w]) slowest = std::min(slowest, clock_[w]);
  }
  return slowest == INT64_MAX || slowest >= step - staleness_;
}

std::vector<uint32_t> SspPolicy::missing(int64_t step, const DeadWorkers& dead) const {
  std::vector<uint32_t> ranks;
  for (size_t w = 0; w < clock_.size(); ++w) {
    if (!dead[w] && clock_[w] < step - staleness_) ranks.push_back(static_cast<uint32_t>(w));
  }
  return ranks;
}

PushResult SspPolicy::on_push(const Contributors& from, int64_t step, StepRequests asks,
                              std::shared_ptr<zmq::message_t> gradient, const DeadWorkers& dead,
                              std::vector<float>& scratch) {
  PushResult r = AspPolicy::on_push(from, step, asks, std::move(gradient), dead, scratch);
  const uint32_t rank = from.at(0);
  if (r.ok()) clock_[rank] = std::max(clock_[rank], step + 1);
  return r;
}

}  // namespace pshard
