// `pshard join RUN_DIR`: one more worker for a running elastic job that `pshard launch --workers MIN:MAX` started.
#pragma once

#include <string>

namespace pshard {

// Reads RUN_DIR/join.json (written by the launch: the worker's command line and environment, with the job token) and
// replaces this process with that worker, which registers with the job's coordinator, takes a free rank and trains
// from the next epoch's start. Returns only by throwing pshard::Error: no such file (not an elastic job, or not one
// started by pshard launch), a malformed one, or an exec that failed.
//
//   join_running_job("runs/fmnist");   // this process is now the job's new worker
[[noreturn]] void join_running_job(const std::string& run_dir);

}  // namespace pshard
