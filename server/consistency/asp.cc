// ASP: apply every push as it comes.
#include "server/consistency/asp.h"

namespace pshard {

bool AspPolicy::ready(int64_t, const DeadWorkers&) const { return true; }

PushResult AspPolicy::on_push(const Contributors& from, int64_t step, StepRequests asks,
                              std::shared_ptr<zmq::message_t> gradient, const DeadWorkers& dead,
                              std::vector<float>& scratch) {
  const uint32_t rank = from.at(0);
  if (asks.skip) {  // async and SSP workers skip a step of theirs by not pushing it
    return {protocol::ErrorCode::BAD_HEADER, "worker " + std::to_string(rank) + " asked to skip step " +
                                                 std::to_string(step) + ": only sync jobs skip a step for all"};
  }
  if (from.size() != 1) {
    return {protocol::ErrorCode::BAD_SENDER, "worker " + std::to_string(rank) + " pushed the sum of " +
                                                 std::to_string(from.size()) +
                                                 " workers' gradients: only sync jobs combine a host's pushes"};
  }
  if (dead[rank]) return {protocol::ErrorCode::WORKER_DEAD, "worker " + std::to_string(rank) + " was declared dead"};
  slice_.apply(aligned_floats(*gradient, scratch), step, 1);
  return {};
}

void AspPolicy::on_worker_dead(uint32_t, const DeadWorkers&, std::vector<float>&) {}

std::string AspPolicy::on_join(uint32_t, int64_t) { return "joining needs sync mode"; }

}  // namespace pshard
