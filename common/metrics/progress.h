// Human-readable lines for the terminal: one per epoch, and a final summary.
#pragma once

#include <string>

#include "common/util/json.h"

namespace pshard {

// "epoch 3/10  train loss 0.4123 acc 85.21%  test loss 0.4510 acc 84.10%  52,310 samples/s  1.2 s"
std::string format_epoch_line(const Json& epoch_event, int64_t epochs);
// "done: test accuracy 88.43% (loss 0.3312), 10 epochs in 41.2 s; metrics in runs/x/metrics.jsonl"; a summary
// with an `aborted` field: "aborted (REASON): after the epochs it finished, test accuracy ..."
std::string format_summary_line(const Json& summary_event, const std::string& run_dir);

}  // namespace pshard
