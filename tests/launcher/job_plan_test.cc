// JobPlan: the worker of a `-- CMD ARGS` job is the user's command with PSHARD_* variables; the other roles and
// pshard's own workers are unchanged; CUDA workers spread over the host's GPUs. Also the "--" of ArgParser that
// carries the command.
#include "launcher/job_plan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/util/args.h"
#include "common/util/host.h"
#include "launcher/gpu_assignment.h"

namespace pshard {
namespace {

bool has(const std::vector<std::string>& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}

JobPlan plan() {
  JobPlan p;
  p.executable = "/opt/pshard";
  p.config_path = "/abs/job.toml";
  p.overrides = {"optimizer.lr=0.1", "train.epochs=3"};
  p.run_dir = "/abs/runs/x";
  p.job_token = "tok";
  p.run_id = "00ff";
  p.num_servers = 2;
  p.num_workers = 4;
  p.coordinator = "tcp://127.0.0.1:47000";
  return p;
}

TEST(JobPlan, AUserCommandWorkerRunsTheCommandWithTheJobInItsEnvironment) {
  JobPlan p = plan();
  p.user_command = {"/usr/bin/python3", "train.py", "--lr", "1"};
  const ChildSpec c = p.worker_process(1, {}, 3);
  EXPECT_EQ(c.name, "worker 1");
  EXPECT_EQ(c.role, NodeRole::kWorker);
  EXPECT_EQ(c.argv, p.user_command);  // no pshard arguments added
  for (const char* e :
       {"PSHARD_COORDINATOR=tcp://127.0.0.1:47000", "PSHARD_CONFIG=/abs/job.toml",
        "PSHARD_SET=optimizer.lr=0.1\ntrain.epochs=3\n", "PSHARD_RUN_DIR=/abs/runs/x", "PSHARD_NUM_WORKERS=4",
        "PSHARD_LOCAL_RANK=3", "PSHARD_RANK=1", "PSHARD_JOB_TOKEN=tok", "PSHARD_RUN_ID=00ff"}) {
    EXPECT_TRUE(has(c.env, e)) << e;
  }
  EXPECT_FALSE(
      std::any_of(c.env.begin(), c.env.end(), [](const std::string& e) { return e.rfind("PSHARD_KEY_DIR", 0) == 0; }));
  // One host (pshard launch): the local rank is the rank; CurveZMQ adds the key directory.
  p.key_dir = "/abs/keys";
  const ChildSpec local = p.worker_process(2);
  EXPECT_TRUE(has(local.env, "PSHARD_LOCAL_RANK=2"));
  EXPECT_TRUE(has(local.env, "PSHARD_KEY_DIR=/abs/keys"));
  // Servers and the coordinator are pshard's as always.
  EXPECT_EQ(p.server_process(0, "tcp://127.0.0.1:47001").argv.at(1), "server");
  EXPECT_EQ(p.coordinator_process("tcp://127.0.0.1:47000").argv.at(1), "coordinator");
}

TEST(JobPlan, WithoutAUserCommandWorkersArePshardWorkers) {
  const ChildSpec c = plan().worker_process(0);
  ASSERT_GE(c.argv.size(), 2u);
  EXPECT_EQ(c.argv[0], "/opt/pshard");
  EXPECT_EQ(c.argv[1], "worker");
  EXPECT_FALSE(std::any_of(c.env.begin(), c.env.end(),
                           [](const std::string& e) { return e.rfind("PSHARD_COORDINATOR", 0) == 0; }));
}

TEST(JobPlan, WorkersOfOneHostAreToldHowManyShareIt) {
  JobPlan p = plan();
  auto shared = [](const ChildSpec& c) {
    return std::count_if(c.env.begin(), c.env.end(),
                         [](const std::string& e) { return e.rfind("PSHARD_WORKERS_ON_HOST=", 0) == 0; });
  };
  EXPECT_EQ(shared(p.worker_process(0)), 0);  // not known (scheduler tasks): nothing exported
  p.workers_on_host = 4;
  EXPECT_TRUE(has(p.worker_process(0).env, "PSHARD_WORKERS_ON_HOST=4"));
  EXPECT_FALSE(has(p.worker_process(0).env, "OMP_NUM_THREADS=1"));  // pshard workers size their own pool
  p.user_command = {"/usr/bin/python3", "train.py"};
  ::unsetenv("OMP_NUM_THREADS");
  const ChildSpec user = p.worker_process(3);
  EXPECT_TRUE(has(user.env, "PSHARD_WORKERS_ON_HOST=4"));
  // The user's program (PyTorch) gets its share of the cores as OpenMP's thread count...
  EXPECT_TRUE(has(user.env, "OMP_NUM_THREADS=" + std::to_string(std::max(1, allowed_cpus() / 4))));
  // ...unless the launcher's own environment chose one, which the worker inherits.
  ::setenv("OMP_NUM_THREADS", "3", 1);
  const ChildSpec inherits = p.worker_process(3);
  EXPECT_FALSE(std::any_of(inherits.env.begin(), inherits.env.end(),
                           [](const std::string& e) { return e.rfind("OMP_NUM_THREADS=", 0) == 0; }));
  ::unsetenv("OMP_NUM_THREADS");
  EXPECT_EQ(shared(p.server_process(0, "tcp://127.0.0.1:47001")), 0);
}

TEST(JobPlan, CudaWorkersSpreadOverTheHostsGpusByLocalRank) {
  JobPlan p = plan();
  auto gpu_of = [](const ChildSpec& c) {
    std::string gpu = "(unset)";
    for (const std::string& e : c.env) {
      if (e.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0) gpu = e.substr(21);
    }
    return gpu;
  };
  EXPECT_EQ(gpu_of(p.worker_process(1)), "(unset)");  // no GPUs named: the worker inherits the launcher's
  p.worker_gpus = {"3", "5"};
  EXPECT_EQ(gpu_of(p.worker_process(0)), "3");
  EXPECT_EQ(gpu_of(p.worker_process(1)), "5");
  EXPECT_EQ(gpu_of(p.worker_process(2)), "3");         // more workers than GPUs: they share, round robin
  EXPECT_EQ(gpu_of(p.worker_process(7, {}, 1)), "5");  // the local rank decides, not the global one
  EXPECT_EQ(gpu_of(p.server_process(0, "tcp://127.0.0.1:47001")), "(unset)");
  p.user_command = {"/usr/bin/python3", "train.py"};
  EXPECT_EQ(gpu_of(p.worker_process(1)), "5");
}

TEST(GpuAssignment, TheVisibleDevicesListElseTheDriversGpus) {
  EXPECT_EQ(host_gpus(nullptr, 2), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(host_gpus("3,5", 8), (std::vector<std::string>{"3", "5"}));
  EXPECT_EQ(host_gpus("GPU-8f2a,,1", 8), (std::vector<std::string>{"GPU-8f2a", "1"}));  // UUIDs pass through
  EXPECT_TRUE(host_gpus("", 8).empty());  // set and empty: no GPU is visible, none is assigned
  EXPECT_TRUE(host_gpus(nullptr, 0).empty());
  EXPECT_EQ(gpu_for_local_rank({}, 0), "");
  EXPECT_EQ(gpu_for_local_rank({"0", "1"}, 3), "1");

  const std::string dir = "/tmp/pshard-gpus-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  EXPECT_EQ(count_nvidia_gpus(dir), 0);  // no driver
  std::filesystem::create_directories(dir + "/0000:17:00.0");
  std::filesystem::create_directories(dir + "/0000:65:00.0");
  EXPECT_EQ(count_nvidia_gpus(dir), 2);
  std::filesystem::remove_all(dir);
}

TEST(ArgParser, EverythingAfterTheFirstDoubleDashIsTheCommand) {
  ArgParser p("pshard launch", "test");
  p.add_option("workers", "W", "workers");
  p.allow_command("the workers' program");
  ASSERT_TRUE(p.parse({"--workers", "2", "--", "python3", "train.py", "--workers", "9", "--"}));
  EXPECT_EQ(p.get("workers"), "2");
  EXPECT_EQ(p.command(), (std::vector<std::string>{"python3", "train.py", "--workers", "9", "--"}));
  EXPECT_NE(p.help().find("[-- CMD ARGS...]"), std::string::npos);

  ArgParser empty("pshard launch", "test");
  empty.allow_command("the workers' program");
  try {
    empty.parse({"--"});
    FAIL() << "a '--' without a command was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'--' must be followed by a command"), std::string::npos) << e.what();
  }
  ArgParser without("pshard train", "test");
  EXPECT_THROW(without.parse({"--", "python3"}), Error);  // no command allowed: an unexpected argument
}

}  // namespace
}  // namespace pshard
