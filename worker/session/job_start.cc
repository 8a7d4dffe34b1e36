// refuse_elastic_restart and join_running_job: one rule and one message for both front ends.
#include "worker/session/job_start.h"

#include <chrono>

#include "common/error.h"
#include "common/util/log.h"

namespace pshard {

void refuse_elastic_restart(bool elastic, bool rejoin, int64_t start_step) {
  if (!elastic || (!rejoin && start_step <= 0)) return;
  throw Error(std::string("an elastic job (cluster.min_workers > 0) cannot be ") +
              (rejoin ? "restarted" : "resumed (start step " + std::to_string(start_step) + ")") +
              ": its epochs' members are not recorded in the checkpoints; workers join it as new ones (pshard join)");
}

std::optional<EpochPlan> join_running_job(ClusterClient& cluster) {
  PSHARD_LOG(kInfo) << "joined the running job: it trains from the next epoch's start";
  std::optional<EpochPlan> plan = cluster.enter_epoch(0, -1, std::chrono::hours(24 * 365));
  if (!plan) PSHARD_LOG(kInfo) << "the job ended before another epoch began: this worker joined too late to train";
  return plan;
}

}  // namespace pshard
