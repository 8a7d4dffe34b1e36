// Where a worker may start in its job, checked alike for the C++ worker and the C API.
#pragma once

#include <cstdint>

namespace pshard {

// A worker of an elastic job (cluster.min_workers > 0) starts fresh or joins as a new worker: a resumed start
// (`start_step` > 0) or a restarted worker rejoining (`rejoin`) is an Error, because the checkpoints do not record
// who trained each epoch. The config's own rules for elastic jobs are checked with the config (config.cc).
void refuse_elastic_restart(bool elastic, bool rejoin, int64_t start_step);

}  // namespace pshard
