// `pshard join RUN_DIR`: one more worker for a running elastic job that `pshard launch --workers MIN:MAX` or
// `pshard task --max-workers MAX` started.
#pragma once

#include <string>

#include "launcher/job_plan.h"

namespace pshard {

// An elastic job's RUN_DIR/join.json: the command line and environment of one more worker of `plan` (without a rank:
// the coordinator gives it a free one), the coordinator, the job token and the key directory. Written by whoever
// starts the coordinator (pshard launch, task 0 of pshard task).
void write_join_file(const std::string& run_dir, const JobPlan& plan);

// Reads RUN_DIR/join.json (written by the launch: the worker's command line and environment, with the job token) and
// runs that worker, which registers with the job's coordinator, takes a free rank and trains from the next epoch's
// start. Like pshard launch, it watches the worker: a worker that dies is reported to the coordinator at once
// (ProcessEnded), and Ctrl-C or SIGTERM stop it. Returns the exit status for `pshard join`: 0 when the worker
// finished, 1 when it failed (said on stderr), 128 + N when a signal N stopped it. Throws pshard::Error for no such
// file (not an elastic job, or not one started by pshard launch), a malformed or unsafe one, or a job not running.
//
//   return join_running_job("runs/fmnist");   // until the new worker ends
int join_running_job(const std::string& run_dir);

}  // namespace pshard
