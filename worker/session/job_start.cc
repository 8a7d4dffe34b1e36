// refuse_elastic_restart: one rule and one message for both front ends.
#include "worker/session/job_start.h"

#include "common/error.h"

namespace pshard {

void refuse_elastic_restart(bool elastic, bool rejoin, int64_t start_step) {
  if (!elastic || (!rejoin && start_step <= 0)) return;
  throw Error(std::string("an elastic job (cluster.min_workers > 0) cannot be ") +
              (rejoin ? "restarted" : "resumed (start step " + std::to_string(start_step) + ")") +
              ": its epochs' members are not recorded in the checkpoints; workers join it as new ones (pshard join)");
}

}  // namespace pshard
