// A run directory belongs to one run (docs/OPERATIONS.md, "Run directories"): a new launch never overwrites or
// inherits another run's files, a resume only sees its own run's checkpoints, and a resume may not change the
// settings that fix what the checkpoints mean. Tiny linear-regression runs (no data files needed).
#include "common/run/run_directory.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "tests/support/run_helpers.h"

namespace {

using pshard::testing::BackgroundJob;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::run_with_timeout;
using pshard::testing::source_dir;
namespace fs = std::filesystem;

// 2048 samples / batch 32 = 64 steps per epoch, one server, one worker, a checkpoint every 50 steps.
std::string linreg(int epochs, const std::string& extra = "") {
  return " --config " + source_dir() + "/configs/linreg_sgd.toml --set data.train_size=2048 --set data.test_size=256" +
         " --set train.epochs=" + std::to_string(epochs) + " --set checkpoint.every_steps=50" + extra;
}

std::string launch(const std::string& args) {
  return pshard_bin() + " launch --servers 1 --workers 1 --timeout 60" + args;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// Run A (4 epochs, checkpoints 50..250, the newest 3 kept) left its checkpoints in run B's directory; B (2 epochs,
// another lr and seed: checkpoints 50 and 100) resumes from its own step 100, never from A's 250.
TEST(RunDirectory, ResumeOnlySeesTheRunsOwnCheckpoints) {
  const std::string dir = fresh_dir("rundir-own");
  int rc = run_with_timeout(launch(linreg(4) + " --run-dir " + dir + "/a"), 90, dir + "/a.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/a.log");
  rc = run_with_timeout(launch(linreg(2, " --set optimizer.lr=0.02 --set run.seed=7") + " --run-dir " + dir + "/b"), 90,
                        dir + "/b.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/b.log");
  const std::string b_model = read_file(dir + "/b/model.bin");
  ASSERT_FALSE(b_model.empty());
  for (const char* name : {"server-0.step-00000200.ckpt", "server-0.step-00000250.ckpt"}) {
    fs::copy_file(dir + "/a/checkpoints/" + name, dir + "/b/checkpoints/" + name);
  }
  rc = run_with_timeout(pshard_bin() + " launch --servers 1 --workers 1 --timeout 60 --resume " + dir + "/b", 90,
                        dir + "/resume.log");
  const std::string log = read_file(dir + "/resume.log");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_TRUE(has(log, "resuming at step 100")) << log;
  EXPECT_TRUE(has(log, "skipping a checkpoint: checkpoint " + dir +
                           "/b/checkpoints/server-0.step-00000250.ckpt: " + "belongs to run "))
      << log;
  EXPECT_TRUE(read_file(dir + "/b/model.bin") == b_model) << "resuming B did not end with B's own weights";
  // A's files are not B's to prune either.
  EXPECT_TRUE(fs::exists(dir + "/b/checkpoints/server-0.step-00000250.ckpt"));
  pshard::testing::remove_dir_if_passed(dir);
}

// The restart loop (cluster.server_failure_policy = restart) and retention only see the run's own files: run A's
// checkpoints 500/550/600 appear in B's checkpoint folder while B runs; a server of B is killed; B restarts from its
// own newest checkpoint, keeps A's files, and ends with the weights of an uninterrupted B.
TEST(RunDirectory, RestartAndRetentionOnlySeeTheRunsOwnCheckpoints) {
  const std::string dir = fresh_dir("rundir-restart");
  int rc = run_with_timeout(launch(linreg(10) + " --run-dir " + dir + "/a"), 90, dir + "/a.log");  // 640 steps
  ASSERT_EQ(rc, 0) << read_file(dir + "/a.log");
  ASSERT_TRUE(fs::exists(dir + "/a/checkpoints/server-0.step-00000600.ckpt")) << read_file(dir + "/a.log");
  // 4 epochs of 64 steps, 5 ms of simulated compute per step: about 1.3 s.
  const std::string b_args = linreg(4, " --set optimizer.lr=0.02 --set run.seed=7 --set train.simulate_compute_ms=5");
  rc = run_with_timeout(launch(b_args + " --run-dir " + dir + "/c"), 90, dir + "/c.log");  // uninterrupted
  ASSERT_EQ(rc, 0) << read_file(dir + "/c.log");
  const std::string want = read_file(dir + "/c/model.bin");

  const std::string b = dir + "/b";
  BackgroundJob job(launch(b_args +
                           " --set cluster.server_failure_policy=restart --set "
                           "cluster.heartbeat_interval_ms=100 --set cluster.heartbeat_timeout_ms=1000" +
                           " --run-dir " + b),
                    dir + "/b.log");
  ASSERT_TRUE(job.started());
  int64_t victim = -1;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (victim < 0 && std::chrono::steady_clock::now() < end) {
    if (fs::exists(b + "/checkpoints/server-0.step-00000100.ckpt") && fs::exists(b + "/cluster.json")) {
      const pshard::Json map = pshard::Json::parse(read_file(b + "/cluster.json"), b + "/cluster.json");
      for (const pshard::Json& n : map.at("nodes").elements()) {
        if (n.at("role").as_string() == "server") victim = n.at("pid").as_int();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(victim, 0) << read_file(dir + "/b.log");
  for (const char* name :
       {"server-0.step-00000500.ckpt", "server-0.step-00000550.ckpt", "server-0.step-00000600.ckpt"}) {
    fs::copy_file(dir + "/a/checkpoints/" + name, b + "/checkpoints/" + name);
  }
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  std::optional<int> status = job.wait(std::chrono::seconds(60));
  const std::string log = read_file(dir + "/b.log");
  ASSERT_TRUE(status.has_value()) << "the job hung after its server was killed\n" << log;
  EXPECT_EQ(*status, 0) << log;
  EXPECT_TRUE(has(log, "restarting the job (restart 1 of 3) from the checkpoint of step 1")) << log;
  EXPECT_FALSE(has(log, "from the checkpoint of step 600")) << log;
  EXPECT_TRUE(has(log, "belongs to run ")) << log;
  for (const char* name : {"server-0.step-00000500.ckpt", "server-0.step-00000600.ckpt"}) {
    EXPECT_TRUE(fs::exists(b + "/checkpoints/" + name)) << name << " of run A was pruned by run B";
  }
  EXPECT_TRUE(read_file(b + "/model.bin") == want) << "the restarted run did not end with an uninterrupted B's weights";
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(RunDirectory, ALaunchIntoAUsedRunDirIsRefusedOrMovesTheOldRunAside) {
  const std::string dir = fresh_dir("rundir-used");
  const std::string d = dir + "/d";
  int rc = run_with_timeout(launch(linreg(1) + " --run-dir " + d), 90, dir + "/1.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/1.log");
  const std::string first_model = read_file(d + "/model.bin");
  const std::string first_metrics = read_file(d + "/metrics.jsonl");
  rc = run_with_timeout(launch(linreg(2) + " --run-dir " + d), 90, dir + "/2.log");
  const std::string log = read_file(dir + "/2.log");
  EXPECT_NE(rc, 0) << log;
  EXPECT_TRUE(has(log, "pshard launch: error: --run-dir " + d + " already holds a run (config.toml, metrics.jsonl"))
      << log;
  EXPECT_TRUE(has(log, "continue it with `pshard launch --resume " + d +
                           "`, or add --start-over to move its files to " + d + ".old-1 and start a new run there"))
      << log;
  EXPECT_TRUE(read_file(d + "/model.bin") == first_model);  // nothing touched
  EXPECT_TRUE(read_file(d + "/metrics.jsonl") == first_metrics);
  EXPECT_TRUE(has(read_file(d + "/config.toml"), "epochs = 1"));

  rc = run_with_timeout(launch(linreg(2) + " --run-dir " + d + " --start-over"), 90, dir + "/3.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/3.log");
  EXPECT_TRUE(has(read_file(dir + "/3.log"), "--start-over: moved the old run to " + d + ".old-1"));
  EXPECT_TRUE(read_file(d + ".old-1/model.bin") == first_model);  // moved, not deleted
  EXPECT_TRUE(read_file(d + ".old-1/metrics.jsonl") == first_metrics);
  EXPECT_TRUE(has(read_file(d + "/config.toml"), "epochs = 2"));
  pshard::testing::remove_dir_if_passed(dir);
}

// Two launches given the same new --run-dir: the first claims it, the second is refused naming the directory and the
// launch that holds it, and the first's files are its own.
TEST(RunDirectory, ASecondLaunchIntoAClaimedRunDirIsRefused) {
  const std::string dir = fresh_dir("rundir-claim");
  const std::string d = dir + "/d";
  // 4 epochs of 64 steps, 10 ms of simulated compute per step: about 3 s.
  BackgroundJob first(launch(linreg(4, " --set train.simulate_compute_ms=10") + " --run-dir " + d), dir + "/1.log");
  ASSERT_TRUE(first.started());
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!fs::exists(d + "/metrics.jsonl") && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(fs::exists(d + "/metrics.jsonl")) << read_file(dir + "/1.log");
  for (const std::string& extra : {std::string(), std::string(" --start-over")}) {
    const int rc = run_with_timeout(launch(linreg(1) + " --run-dir " + d + extra), 60, dir + "/2.log");
    const std::string log = read_file(dir + "/2.log");
    EXPECT_NE(rc, 0) << log;
    EXPECT_TRUE(has(log, "pshard launch: error: the run directory " + d + " is in use by process ")) << log;
  }
  const int rc =
      run_with_timeout(pshard_bin() + " launch --servers 1 --workers 1 --timeout 60 --resume " + d, 60, dir + "/3.log");
  EXPECT_NE(rc, 0);
  EXPECT_TRUE(has(read_file(dir + "/3.log"), "the run directory " + d + " is in use by process "))
      << read_file(dir + "/3.log");
  std::optional<int> status = first.wait(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << read_file(dir + "/1.log");
  EXPECT_EQ(*status, 0) << read_file(dir + "/1.log");
  EXPECT_FALSE(fs::exists(d + ".old-1"));
  EXPECT_TRUE(has(read_file(d + "/config.toml"), "epochs = 4"));
  pshard::testing::remove_dir_if_passed(dir);
}

// A launch refused before any process started leaves the directory free for the corrected command.
TEST(RunDirectory, ALaunchRefusedAtStartLeavesTheRunDirFree) {
  const std::string dir = fresh_dir("rundir-refused");
  const std::string d = dir + "/d";
  fs::create_directories(dir + "/keys");
  fs::permissions(dir + "/keys", fs::perms::all);  // 0777: anyone could replace the key file
  int rc = run_with_timeout(
      launch(linreg(1, " --set security.curve=true --set security.key_dir=" + dir + "/keys") + " --run-dir " + d), 60,
      dir + "/1.log");
  ASSERT_NE(rc, 0) << read_file(dir + "/1.log");
  ASSERT_TRUE(has(read_file(dir + "/1.log"), "has mode 0777")) << read_file(dir + "/1.log");
  rc = run_with_timeout(launch(linreg(1) + " --run-dir " + d + "/"), 90, dir + "/2.log");
  EXPECT_EQ(rc, 0) << read_file(dir + "/2.log");
  EXPECT_TRUE(fs::exists(d + "/model.bin"));
  pshard::testing::remove_dir_if_passed(dir);
}

// A launch (or pshard train) refused by its workers before the first step (a data set smaller than one global batch)
// trained nothing: it gives the directory back, and the corrected command runs there without --start-over. A run that
// trained keeps its files.
TEST(RunDirectory, ARunRefusedBeforeItsFirstStepGivesTheRunDirBack) {
  const std::string dir = fresh_dir("rundir-untrained");
  const std::string too_small = " --set data.train_size=16";
  for (const std::string cmd : {"launch", "train"}) {
    const std::string d = dir + "/" + cmd;
    auto command = [&](const std::string& extra) {
      return (cmd == "launch" ? launch(linreg(1) + extra) : pshard_bin() + " train" + linreg(1) + extra) +
             " --run-dir " + d;
    };
    int rc = run_with_timeout(command(too_small), 60, dir + "/" + cmd + "-1.log");
    ASSERT_NE(rc, 0) << read_file(dir + "/" + cmd + "-1.log");
    ASSERT_TRUE(has(read_file(dir + "/" + cmd + "-1.log"), "fewer than one global batch"))
        << read_file(dir + "/" + cmd + "-1.log");
    EXPECT_TRUE(pshard::run_files_in(d).empty()) << cmd << " left run files in " << d;
    rc = run_with_timeout(command(""), 90, dir + "/" + cmd + "-2.log");
    EXPECT_EQ(rc, 0) << read_file(dir + "/" + cmd + "-2.log");
    EXPECT_TRUE(fs::exists(d + "/model.bin"));
    // That run trained: a refused run in its directory (without --start-over) leaves it alone.
    rc = run_with_timeout(command(too_small), 60, dir + "/" + cmd + "-3.log");
    EXPECT_NE(rc, 0);
    EXPECT_TRUE(fs::exists(d + "/model.bin") && fs::exists(d + "/run-id")) << read_file(dir + "/" + cmd + "-3.log");
  }
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(RunDirectory, WithoutRunDirEachRunGetsAFreshDirectory) {
  const std::string dir = fresh_dir("rundir-default");
  for (const std::string cmd : {"launch", "train"}) {
    for (int i = 0; i < 2; ++i) {
      const std::string base = cmd == "launch" ? launch(linreg(1)) : pshard_bin() + " train" + linreg(1);
      const std::string log = dir + "/" + cmd + std::to_string(i) + ".log";
      const int rc = run_with_timeout("env -C " + dir + " " + base + " --set run.name=" + cmd, 90, log);
      ASSERT_EQ(rc, 0) << read_file(log);
      const std::string want = dir + "/runs/" + cmd + (i == 0 ? "" : ".1");
      EXPECT_TRUE(has(read_file(log), "run directory: " + (cmd == "launch" ? want : "runs/" + cmd + (i ? ".1" : ""))))
          << read_file(log);
      EXPECT_TRUE(fs::exists(want + "/model.bin")) << want;
    }
  }
  // pshard train refuses a used --run-dir too.
  const int rc = run_with_timeout(pshard_bin() + " train" + linreg(1) + " --run-dir " + dir + "/runs/train", 60,
                                  dir + "/train-again.log");
  EXPECT_NE(rc, 0);
  EXPECT_TRUE(has(read_file(dir + "/train-again.log"),
                  "pshard train: error: --run-dir " + dir + "/runs/train already holds a run"))
      << read_file(dir + "/train-again.log");
  pshard::testing::remove_dir_if_passed(dir);
}

// pshard task (srun, mpirun, PBS): the tasks cannot agree on a fresh directory, so task 0 refuses a used one.
TEST(RunDirectory, TaskZeroRefusesARunDirThatHoldsARun) {
  const std::string dir = fresh_dir("rundir-task");
  int rc = run_with_timeout(launch(linreg(1) + " --run-dir " + dir + "/run"), 90, dir + "/first.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/first.log");
  const std::string model = read_file(dir + "/run/model.bin");
  rc = run_with_timeout(
      "env PSHARD_JOB_TOKEN=task-test SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_NTASKS=2 "
      "SLURM_NODEID=0 SLURM_JOB_NODELIST=node1 SLURM_TASKS_PER_NODE=2 SLURM_PROCID=0 "
      "SLURM_LOCALID=0 " +
          pshard_bin() + " slurm" + linreg(1) + " --iface lo --coordinator-host 127.0.0.1 --run-dir " + dir + "/run",
      60, dir + "/task0.log");
  const std::string log = read_file(dir + "/task0.log");
  EXPECT_NE(rc, 0) << log;
  EXPECT_TRUE(has(log, "pshard task: the run directory " + dir + "/run already holds a run (config.toml")) << log;
  EXPECT_TRUE(read_file(dir + "/run/model.bin") == model);
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(RunDirectory, AResumeMayNotChangeTheSettingsTheCheckpointsDependOn) {
  const std::string dir = fresh_dir("rundir-settings");
  const std::string d = dir + "/d";
  int rc =
      run_with_timeout(launch(linreg(2, " --set lr_schedule.name=cosine") + " --run-dir " + d), 90, dir + "/a.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/a.log");
  const std::string config = read_file(d + "/config.toml");
  const std::string model = read_file(d + "/model.bin");
  struct Case {
    std::string set, message;
  };
  for (const Case& c : {Case{"train.epochs=8",
                             "pshard launch --resume: train.epochs = 8 differs from the run's "
                             "train.epochs = 2 (" +
                                 d + "/config.toml) and may not change on resume"},
                        Case{"train.batch_size=64",
                             "train.batch_size = 64 differs from the run's train.batch_size = "
                             "32"}}) {
    rc = run_with_timeout(
        pshard_bin() + " launch --servers 1 --workers 1 --timeout 60 --resume " + d + " --set " + c.set, 60,
        dir + "/resume.log");
    const std::string log = read_file(dir + "/resume.log");
    EXPECT_NE(rc, 0) << log;
    EXPECT_TRUE(has(log, c.message)) << log;
    EXPECT_TRUE(read_file(d + "/config.toml") == config) << "a refused resume rewrote config.toml";
    EXPECT_TRUE(read_file(d + "/model.bin") == model);
  }
  // Settings of how the run is run may change: the resume goes ahead.
  rc = run_with_timeout(pshard_bin() + " launch --servers 1 --workers 1 --timeout 60 --resume " + d +
                            " --set checkpoint.keep=5 --set train.log_every=10",
                        60, dir + "/ok.log");
  EXPECT_EQ(rc, 0) << read_file(dir + "/ok.log");
  EXPECT_TRUE(read_file(d + "/model.bin") == model) << "resuming a finished run changed its weights";
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
