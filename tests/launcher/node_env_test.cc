// The job plan's environment read back: what JobPlan exports to a server, a pshard worker and a program started as
// a worker is what NodeEnv::from_environment finds there; a malformed count is an error naming its variable.
#include "common/run/node_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "launcher/job_plan.h"

namespace pshard {
namespace {

// The variables of `env` ("NAME=VALUE" entries, as a ChildSpec holds them) as a Getenv.
struct Environment {
  std::map<std::string, std::string> vars;
  explicit Environment(const std::vector<std::string>& env) {
    for (const std::string& e : env) {
      const size_t eq = e.find('=');
      vars[e.substr(0, eq)] = e.substr(eq + 1);
    }
  }
  Getenv getenv() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

JobPlan plan() {
  JobPlan p;
  p.executable = "/opt/pshard";
  p.config_path = "/abs/job.toml";
  p.overrides = {"optimizer.lr=0.1", "train.epochs=3"};
  p.run_dir = "/abs/runs/x";
  p.key_dir = "/abs/runs/x/keys";
  p.job_token = "tok";
  p.run_id = "00ff";
  p.num_servers = 2;
  p.num_workers = 4;
  p.coordinator = "tcp://127.0.0.1:47000";
  return p;
}

TEST(NodeEnv, AUserCommandWorkerReadsBackEverythingThePlanExports) {
  JobPlan p = plan();
  p.user_command = {"/usr/bin/python3", "train.py"};
  const Environment env(p.worker_process(1, {}, 3).env);
  const NodeEnv e = NodeEnv::from_environment(env.getenv());
  EXPECT_EQ(e.job_token, p.job_token);
  EXPECT_EQ(e.run_id, p.run_id);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.coordinator, p.coordinator);
  EXPECT_EQ(e.config_path, p.config_path);
  EXPECT_EQ(e.overrides, p.overrides);
  EXPECT_EQ(e.run_dir, p.run_dir);
  EXPECT_EQ(e.key_dir, p.key_dir);
  EXPECT_EQ(e.num_workers, 4);
  EXPECT_EQ(e.local_rank, 3);
  EXPECT_EQ(e.start_step, -1);  // a new run
  EXPECT_FALSE(e.rejoin);
}

TEST(NodeEnv, AResumedRunTellsAUserCommandItsStartStep) {
  JobPlan p = plan();
  p.user_command = {"/usr/bin/python3", "train.py"};
  p.resume_step = 40;
  const NodeEnv e = NodeEnv::from_environment(Environment(p.worker_process(1, {}, 3).env).getenv());
  EXPECT_EQ(e.start_step, 40);
  EXPECT_FALSE(e.rejoin);
  EXPECT_TRUE(NodeEnv::from_environment(Environment({"PSHARD_REJOIN=1"}).getenv()).rejoin);
  EXPECT_FALSE(NodeEnv::from_environment(Environment({"PSHARD_REJOIN=0"}).getenv()).rejoin);
}

TEST(NodeEnv, ServersAndWorkersReadTheirTokenRunIdAndRank) {
  const JobPlan p = plan();
  for (const ChildSpec& c : {p.server_process(1, "tcp://*:0"), p.worker_process(2)}) {
    const Environment env(c.env);
    const NodeEnv e = NodeEnv::from_environment(env.getenv());
    EXPECT_EQ(e.job_token, "tok") << c.name;
    EXPECT_EQ(e.run_id, "00ff") << c.name;
    EXPECT_EQ(e.rank, c.role == NodeRole::kServer ? 1 : 2) << c.name;
    EXPECT_EQ(e.coordinator, "") << c.name;  // pshard's own processes get it as an argument
    EXPECT_TRUE(e.overrides.empty()) << c.name;
  }
  // No rank (the coordinator assigns one) and no run id (RUN_DIR/run-id is read instead).
  JobPlan q = plan();
  q.run_id = "";
  const Environment env(q.worker_process(-1).env);
  const NodeEnv e = NodeEnv::from_environment(env.getenv());
  EXPECT_EQ(e.rank, -1);
  EXPECT_EQ(e.run_id, "");
  EXPECT_EQ(e.job_token, "tok");
}

TEST(NodeEnv, TheCoordinatorReadsItsToken) {
  const Environment env(plan().coordinator_process("tcp://127.0.0.1:0").env);
  EXPECT_EQ(NodeEnv::from_environment(env.getenv()).job_token, "tok");
}

TEST(NodeEnv, NothingSetLeavesTheDefaults) {
  const Environment env({});
  const NodeEnv e = NodeEnv::from_environment(env.getenv());
  EXPECT_EQ(e.job_token, "");
  EXPECT_EQ(e.rank, -1);
  EXPECT_EQ(e.num_workers, -1);
  EXPECT_EQ(e.local_rank, -1);
  EXPECT_TRUE(e.overrides.empty());
}

TEST(NodeEnv, AMalformedCountNamesItsVariable) {
  for (const char* name :
       {"PSHARD_RANK", "PSHARD_NUM_WORKERS", "PSHARD_LOCAL_RANK", "PSHARD_START_STEP", "PSHARD_REJOIN"}) {
    const Environment env({std::string(name) + "=abc"});
    try {
      NodeEnv::from_environment(env.getenv());
      ADD_FAILURE() << name << "=abc was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("environment variable ") + name + " must be a non-negative integer, got 'abc'");
    }
  }
}

}  // namespace
}  // namespace pshard
