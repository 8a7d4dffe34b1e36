// Reading the job plan's PSHARD_* variables (see node_env.h).
#include "common/run/node_env.h"

#include <sstream>

namespace pshard {
namespace {

std::string text(const Getenv& getenv, const char* name) {
  const char* v = getenv(name);
  return v ? v : "";
}

}  // namespace

NodeEnv NodeEnv::from_environment(const Getenv& getenv) {
  NodeEnv e;
  e.job_token = text(getenv, "PSHARD_JOB_TOKEN");
  e.run_id = text(getenv, "PSHARD_RUN_ID");
  e.rank = env_count("PSHARD_RANK", getenv).value_or(-1);
  e.coordinator = text(getenv, "PSHARD_COORDINATOR");
  e.config_path = text(getenv, "PSHARD_CONFIG");
  std::stringstream lines(text(getenv, "PSHARD_SET"));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) e.overrides.push_back(line);
  }
  e.run_dir = text(getenv, "PSHARD_RUN_DIR");
  e.key_dir = text(getenv, "PSHARD_KEY_DIR");
  e.num_workers = env_count("PSHARD_NUM_WORKERS", getenv).value_or(-1);
  e.local_rank = env_count("PSHARD_LOCAL_RANK", getenv).value_or(-1);
  e.start_step = env_count("PSHARD_START_STEP", getenv).value_or(-1);
  e.rejoin = env_count("PSHARD_REJOIN", getenv).value_or(0) > 0;
  return e;
}

}  // namespace pshard
