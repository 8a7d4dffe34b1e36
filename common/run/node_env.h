// What a process of a job learns from its environment: the PSHARD_* variables that the job plan
// (launcher/job_plan.h) exports to every server and worker, and to programs started as workers
// (`pshard launch ... -- CMD`, docs/PYTHON.md). The job plan writes them; this is their one reader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/util/env.h"

namespace pshard {

// The node's side of the job plan's environment contract (docs/OPERATIONS.md). Every field is read as
// written; an unset variable leaves its default.
//
//   const NodeEnv env = NodeEnv::from_environment();   // PSHARD_RANK=abc throws, naming the variable
//   copt.job_token = env.job_token;
//   copt.requested_rank = env.rank;                    // -1: the coordinator assigns one
struct NodeEnv {
  // Every server and worker (JobPlan::node_env).
  std::string job_token;  // PSHARD_JOB_TOKEN; "": nodes without a token
  std::string run_id;     // PSHARD_RUN_ID; "": read RUN_DIR/run-id instead
  int64_t rank = -1;      // PSHARD_RANK; -1: the coordinator assigns one
  // Programs started as workers (JobPlan::user_env): they get no pshard arguments.
  std::string coordinator;             // PSHARD_COORDINATOR
  std::string config_path;             // PSHARD_CONFIG
  std::vector<std::string> overrides;  // PSHARD_SET: the --set overrides, one per line
  std::string run_dir;                 // PSHARD_RUN_DIR; "": none
  std::string key_dir;                 // PSHARD_KEY_DIR; "": security.key_dir, else RUN_DIR/keys
  int64_t num_workers = -1;            // PSHARD_NUM_WORKERS; -1: not set
  int64_t local_rank = -1;             // PSHARD_LOCAL_RANK: its index among the workers on its host; -1: not set
  int64_t start_step = -1;             // PSHARD_START_STEP: a resumed run's first step (--resume); -1: not set
  bool rejoin = false;                 // PSHARD_REJOIN=1: a restarted worker that rejoins the running job

  // Reads the variables above. A count that is not a non-negative integer (PSHARD_RANK, PSHARD_NUM_WORKERS,
  // PSHARD_LOCAL_RANK, PSHARD_START_STEP, PSHARD_REJOIN) is a pshard::Error naming the variable (common/util/env.h).
  static NodeEnv from_environment(const Getenv& getenv = process_getenv);
};

}  // namespace pshard
