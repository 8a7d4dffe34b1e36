// Where a worker may start in its job, decided alike for the C++ worker and the C API.
#pragma once

#include <cstdint>
#include <optional>

#include "common/control/cluster_client.h"

namespace pshard {

// A worker of an elastic job (cluster.min_workers > 0) starts fresh or joins as a new worker: a resumed start
// (`start_step` > 0) or a restarted worker rejoining (`rejoin`) is an Error, because the checkpoints do not record
// who trained each epoch. The config's own rules for elastic jobs are checked with the config (config.cc).
void refuse_elastic_restart(bool elastic, bool rejoin, int64_t start_step);

// A worker that registered with an elastic job already running (ClusterClient::joins_running): waits for the next
// epoch's start, which is where it trains from (the wait lasts the rest of the running epoch, and ends with the job
// at the latest). nullopt when the job ended first: the worker did not train and leaves with status 0 (the C++
// worker exits 0; pshard_start answers PSHARD_JOB_ENDED, on which the Python package exits 0).
std::optional<EpochPlan> join_running_job(ClusterClient& cluster);

}  // namespace pshard
