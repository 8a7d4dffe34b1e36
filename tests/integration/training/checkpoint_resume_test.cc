// Checkpoints and failures through real processes: a resumed sync run ends with the same weights as an
// uninterrupted one, corrupt checkpoints are named and skipped, and a SIGKILLed server either ends the
// job promptly (server_failure_policy = abort) or the job restarts from its checkpoint and finishes; a SIGKILLed
// worker restarted by launch rejoins the running job.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "tests/support/run_helpers.h"

namespace {

using namespace pshard;
using pshard::testing::BackgroundJob;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::read_summary;
using pshard::testing::run_with_timeout;
using pshard::testing::source_dir;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

bool have_data() { return fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); }

// Momentum + cosine schedule with linear scaling: the optimizer state, the update counters and
// the schedule's step must all come back for the weights to match.
std::string job_args(int epochs, int every) {
  return " --config " + source_dir() +
         "/configs/fmnist_mlp_sync.toml --set data.train_size=6400 --set data.test_size=1000 --set train.epochs=" +
         std::to_string(epochs) + " --set checkpoint.every_steps=" + std::to_string(every) +
         " --set checkpoint.keep=0 --set cluster.heartbeat_interval_ms=200 --set cluster.heartbeat_timeout_ms=1500";
}

// Server 1's pid once the run wrote `file_marker` (a checkpoint) and cluster.json.
int64_t server1_pid_after(const std::string& run_dir, const std::string& marker, std::chrono::seconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    if (fs::exists(run_dir + "/" + marker) && fs::exists(run_dir + "/cluster.json")) {
      Json map = Json::parse(read_file(run_dir + "/cluster.json"), run_dir + "/cluster.json");
      for (const Json& n : map.at("nodes").elements()) {
        if (n.at("role").as_string() == "server" && n.at("rank").as_int() == 1) return n.at("pid").as_int();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

void copy_run(const std::string& from, const std::string& to) {
  fs::create_directories(to + "/checkpoints");
  fs::copy_file(from + "/config.toml", to + "/config.toml");
  fs::copy_file(from + "/run-id", to + "/run-id");  // the checkpoints are that run's
  for (const auto& e : fs::directory_iterator(from + "/checkpoints")) {
    fs::copy_file(e.path(), to + "/checkpoints/" + e.path().filename().string());
  }
}

TEST(CheckpointResume, ResumedRunEndsWithTheSameWeightsAsAnUninterruptedOne) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string dir = fresh_dir("ckpt-resume");
  // 6400 samples / (2 workers x 64) = 50 steps per epoch, 150 in all; checkpoints at 40, 80, 120.
  const std::string a = dir + "/a";
  int rc = run_with_timeout(
      pshard_bin() + " launch --servers 2 --workers 2 --timeout 120" + job_args(3, 40) + " --run-dir " + a, 150,
      dir + "/a.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/a.log");
  for (int64_t step : {40, 80, 120}) {
    for (int s = 0; s < 2; ++s) {
      char name[64];
      std::snprintf(name, sizeof name, "/checkpoints/server-%d.step-%08lld.ckpt", s, static_cast<long long>(step));
      ASSERT_TRUE(fs::exists(a + name)) << name << "\n" << read_file(dir + "/a.log");
    }
  }
  const std::string want = read_file(a + "/model.bin");
  ASSERT_GT(want.size(), 100000u);

  // checkpoint.every_seconds: worker 0 flags a step, every server checkpoints that same boundary;
  // checkpointing does not change the training.
  const std::string d = dir + "/d";
  rc = run_with_timeout(pshard_bin() + " launch --servers 2 --workers 2 --timeout 120" + job_args(3, 0) +
                            " --set checkpoint.every_seconds=0.2 --run-dir " + d,
                        150, dir + "/d.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/d.log");
  EXPECT_TRUE(read_file(d + "/model.bin") == want) << "a run with timed checkpoints trained differently";
  std::vector<int64_t> timed[2];
  for (uint32_t s = 0; s < 2; ++s) {
    for (const auto& e : fs::directory_iterator(d + "/checkpoints")) {
      const std::string name = e.path().filename().string();
      const std::string prefix = "server-" + std::to_string(s) + ".step-";
      if (name.rfind(prefix, 0) == 0) timed[s].push_back(std::stoll(name.substr(prefix.size(), 8)));
    }
    std::sort(timed[s].begin(), timed[s].end());
  }
  ASSERT_FALSE(timed[0].empty()) << read_file(dir + "/d.log");
  EXPECT_EQ(timed[0], timed[1]);  // the same step boundaries on both servers

  // Resume from step 80 (epoch 2, 30 batches in): only checkpoints 40 and 80 are left.
  const std::string b = dir + "/b";
  copy_run(a, b);
  for (int s = 0; s < 2; ++s) fs::remove(b + "/checkpoints/server-" + std::to_string(s) + ".step-00000120.ckpt");
  rc = run_with_timeout(pshard_bin() + " launch --servers 2 --workers 2 --timeout 120 --resume " + b, 150,
                        dir + "/b.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/b.log");
  EXPECT_NE(read_file(dir + "/b.log").find("resuming at step 80"), std::string::npos) << read_file(dir + "/b.log");
  EXPECT_TRUE(read_file(b + "/model.bin") == want) << "weights after resuming at step 80 differ from the "
                                                      "uninterrupted run (bitwise)";
  Json summary = read_summary(b);
  EXPECT_EQ(summary.at("epochs").as_int(), 2) << summary.dump();  // epochs 2 and 3 ran after the resume

  // A truncated newest checkpoint is named and skipped: the run resumes from step 40, same result.
  const std::string c = dir + "/c";
  copy_run(a, c);
  for (int s = 0; s < 2; ++s) fs::remove(c + "/checkpoints/server-" + std::to_string(s) + ".step-00000120.ckpt");
  const std::string bad = c + "/checkpoints/server-1.step-00000080.ckpt";
  fs::resize_file(bad, fs::file_size(bad) / 2);
  rc = run_with_timeout(pshard_bin() + " launch --servers 2 --workers 2 --timeout 120 --resume " + c, 150,
                        dir + "/c.log");
  const std::string log = read_file(dir + "/c.log");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("skipping a checkpoint: checkpoint " + bad), std::string::npos) << log;
  EXPECT_NE(log.find("resuming at step 40"), std::string::npos) << log;
  EXPECT_TRUE(read_file(c + "/model.bin") == want) << "weights after resuming at step 40 differ";
  pshard::testing::remove_dir_if_passed(dir);
}

// checkpoint.on_sigterm = checkpoint: a SIGTERM to `pshard launch` (as a preemption or a time limit sends) stops the
// job at the next step boundary, every server checkpoints that boundary, the launch exits 75; `--resume` then ends
// with the weights of an uninterrupted run, bit for bit (and not those of the run's start: it trained).
// `extra`: settings added to every launch of the test.
void sigterm_stop_then_resume(const std::string& name, const std::string& extra) {
  const std::string dir = fresh_dir(name);
  // 12800 samples / (2 x 64) = 100 steps per epoch, 500 in all, a step event every 10 steps; no periodic
  // checkpoints.
  const std::string args = job_args(5, 0) +
                           " --set data.train_size=12800 --set checkpoint.on_sigterm=checkpoint"
                           " --set train.log_every=10" +
                           extra;
  const std::string a = dir + "/a";
  int rc = run_with_timeout(pshard_bin() + " launch --servers 2 --workers 2 --timeout 120" + args + " --run-dir " + a,
                            150, dir + "/a.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/a.log");
  const std::string want = read_file(a + "/model.bin");
  ASSERT_GT(want.size(), 100000u);

  const std::string b = dir + "/b";
  BackgroundJob job(pshard_bin() + " launch --servers 2 --workers 2 --timeout 120" + args + " --run-dir " + b,
                    dir + "/b.log");
  ASSERT_TRUE(job.started());
  // Once step 110 (in epoch 2) was logged, SIGTERM to the launch alone: it passes the signal on.
  const auto end = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < end && read_file(b + "/metrics.jsonl").find("\"step\":110,") == std::string::npos) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(::kill(job.pid(), SIGTERM), 0);
  std::optional<int> code = job.wait(std::chrono::seconds(60));
  const std::string log = read_file(dir + "/b.log");
  ASSERT_TRUE(code.has_value()) << "the job did not stop after SIGTERM\n" << log;
  ASSERT_EQ(*code, kExitStopped) << log;
  EXPECT_NE(log.find("job stopped at a checkpoint on SIGTERM"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(b + "/model.bin")) << "a stopped job saved a model that is not final";
  // Both servers checkpointed the same boundary, the one the workers stopped at.
  std::vector<int64_t> steps[2];
  for (uint32_t s = 0; s < 2; ++s) {
    const std::string prefix = "server-" + std::to_string(s) + ".step-";
    for (const auto& e : fs::directory_iterator(b + "/checkpoints")) {
      const std::string name = e.path().filename().string();
      if (name.rfind(prefix, 0) == 0) steps[s].push_back(std::stoll(name.substr(prefix.size(), 8)));
    }
  }
  ASSERT_EQ(steps[0].size(), 1u) << log;
  EXPECT_EQ(steps[0], steps[1]) << log;
  const int64_t at = steps[0][0];
  EXPECT_GT(at, 110) << log;
  EXPECT_LT(at, 500) << log;
  EXPECT_NE(log.find("stopped at step " + std::to_string(at) + " of 500 on SIGTERM"), std::string::npos) << log;
  const Json stopped = read_summary(b);
  EXPECT_TRUE(stopped.has("stopped")) << stopped.dump();

  rc = run_with_timeout(pshard_bin() + " launch --servers 2 --workers 2 --timeout 120 --resume " + b, 150,
                        dir + "/b2.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/b2.log");
  EXPECT_NE(read_file(dir + "/b2.log").find("resuming at step " + std::to_string(at)), std::string::npos)
      << read_file(dir + "/b2.log");
  EXPECT_TRUE(read_file(b + "/model.bin") == want) << "the weights after the stop and --resume differ from the "
                                                      "uninterrupted run's (bitwise)";
  EXPECT_GT(read_summary(b).at("test_acc").as_number(), 0.75);  // it learned: the weights compared are trained ones
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(Preemption, SigtermStopsTheJobAtACheckpointThatResumeContinuesBitwise) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  sigterm_stop_then_resume("sigterm-stop", "");
}

// The same with one push per host (over TCP, so that the host's two workers push through their leader): the member's
// stop reaches the servers with the leader's push, and the boundary they stop at reaches the member.
TEST(Preemption, AJobPushingOncePerHostStopsAndResumesBitwiseToo) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  sigterm_stop_then_resume("sigterm-stop-host", " --set cluster.host_aggregation=always --set cluster.transport=tcp");
}

// A top-k job with error feedback, stopped on SIGTERM: every worker writes its residuals of the boundary the servers
// stopped at, and the resumed run ends bitwise like the uninterrupted one.
TEST(Preemption, ACompressedJobStopsAndResumesBitwise) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  sigterm_stop_then_resume("sigterm-stop-topk",
                           " --set cluster.compression=topk --set cluster.compression_ratio=0.25"
                           " --set cluster.compression_min_bytes=0 --set cluster.error_feedback=true");
}

// A compressed job resumes bitwise like an uninterrupted run: top-k without error feedback, top-k with it (each
// worker's residuals are in its residual file of the checkpoint step), and random-k with and without it (its sampler
// is in the file too). Without
// the residual files, the residuals start again at zero, the workers say so, and the weights differ. Linear
// regression: no data files needed; 2048 / (2 x 32) = 32 steps per epoch, checkpoints every 20.
// The last line of `kind` in RUN_DIR/metrics.jsonl.
Json last_line(const std::string& run_dir, const std::string& kind) {
  Json found;
  std::istringstream lines(read_file(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const Json j = Json::parse(line, "metrics.jsonl");
    if (j.at("event").as_string() == kind) found = j;
  }
  return found;
}

// An fp16 job stopped at a checkpoint on SIGTERM and resumed continues its loss scaler where it left it: the scale,
// its clean steps, and the data position (the resume step plus the steps skipped before it; TrainerOptions::
// skipped_before). A growth interval of 20 makes the scale overflow again and again, so that a scaler started afresh
// at the resume step would skip other steps: the resumed run ends with the uninterrupted run's weights, bit for bit,
// and its last epoch line says the same loss scale and skipped steps.
TEST(Preemption, AResumedFp16RunContinuesItsLossScale) {
  if (!have_data()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = fresh_dir("loss-scaling-resume");
  // 12800 samples / (2 x 64) = 100 data steps per epoch, 200 in all; a step line every 10 steps.
  const std::string args = " launch --servers 2 --workers 2 --timeout 120 --config " + source_dir() +
                           "/configs/fmnist_mlp_sync.toml --set data.train_size=12800 --set data.test_size=1000"
                           " --set train.epochs=2 --set train.precision=fp16 --set train.loss_scale=1e12"
                           " --set train.loss_scale_growth_interval=20 --set train.log_every=10"
                           " --set checkpoint.on_sigterm=checkpoint --set cluster.transport=tcp";
  const std::string a = dir + "/a", b = dir + "/b";
  int rc = run_with_timeout(pshard_bin() + args + " --run-dir " + a, 180, dir + "/a.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/a.log");
  {
    BackgroundJob job(pshard_bin() + args + " --run-dir " + b, dir + "/b.log");
    ASSERT_TRUE(job.started());
    // SIGTERM once data step 130 (in epoch 2, after the first skips and some regrowths) was logged.
    const auto end = Clock::now() + std::chrono::seconds(90);
    while (Clock::now() < end && read_file(b + "/metrics.jsonl").find("\"step\":130,") == std::string::npos) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(::kill(job.pid(), SIGTERM), 0);
    const std::optional<int> code = job.wait(std::chrono::seconds(60));
    ASSERT_TRUE(code.has_value()) << read_file(dir + "/b.log");
    ASSERT_EQ(*code, kExitStopped) << read_file(dir + "/b.log");
  }
  rc = run_with_timeout(pshard_bin() + " launch --servers 2 --workers 2 --timeout 120 --resume " + b, 180,
                        dir + "/b2.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/b2.log");
  const Json want = last_line(a, "epoch"), got = last_line(b, "epoch");
  ASSERT_TRUE(want.has("loss_scale") && got.has("loss_scale")) << want.dump() << "\n" << got.dump();
  EXPECT_GT(want.at("skipped_steps").as_int(), 0) << want.dump();
  EXPECT_EQ(got.at("loss_scale").as_number(), want.at("loss_scale").as_number()) << read_file(dir + "/b2.log");
  EXPECT_EQ(got.at("skipped_steps").as_int(), want.at("skipped_steps").as_int()) << read_file(dir + "/b2.log");
  EXPECT_TRUE(read_file(b + "/model.bin") == read_file(a + "/model.bin"))
      << "the resumed fp16 run's weights differ from the uninterrupted run's";
  std::printf("fp16, growth interval 20: %lld steps skipped, loss scale %g at the end, resumed run bitwise equal\n",
              static_cast<long long>(read_summary(a).at("skipped_steps").as_int()), want.at("loss_scale").as_number());
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(CheckpointResume, ACompressedJobResumesAsDocumented) {
  const std::string dir = fresh_dir("ckpt-topk");
  struct Case {
    std::string tag, codec;
    bool feedback, drop_residual_files;
  };
  for (const Case& c : {Case{"plain", "topk", false, false}, Case{"ef", "topk", true, false},
                        Case{"randomk-ef", "randomk", true, false}, Case{"randomk", "randomk", false, false},
                        Case{"ef-no-files", "topk", true, true}}) {
    const std::string args =
        " --config " + source_dir() +
        "/configs/linreg_sgd.toml --set data.train_size=2048 --set data.test_size=256 --set train.batch_size=32 "
        "--set train.epochs=3 --set checkpoint.every_steps=20 --set checkpoint.keep=0 --set cluster.compression=" +
        c.codec + " --set cluster.compression_ratio=0.25 --set cluster.compression_min_bytes=0 " +
        "--set cluster.error_feedback=" + std::string(c.feedback ? "true" : "false");
    const std::string a = dir + "/a-" + c.tag, b = dir + "/b-" + c.tag;
    int rc = run_with_timeout(pshard_bin() + " launch --servers 1 --workers 2 --timeout 90" + args + " --run-dir " + a,
                              120, dir + "/a-" + c.tag + ".log");
    ASSERT_EQ(rc, 0) << read_file(dir + "/a-" + c.tag + ".log");
    const std::string want = read_file(a + "/model.bin");
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(fs::exists(a + "/checkpoints/worker-1.step-00000040.residuals"), c.feedback || c.codec == "randomk")
        << c.tag;
    copy_run(a, b);
    for (const auto& e : fs::directory_iterator(b + "/checkpoints")) {
      const std::string name = e.path().filename().string();
      const bool keep = name == "server-0.step-00000040.ckpt" ||
                        (!c.drop_residual_files && name.find(".step-00000040.residuals") != std::string::npos);
      if (!keep) fs::remove(e.path());
    }
    rc = run_with_timeout(pshard_bin() + " launch --servers 1 --workers 2 --timeout 90 --resume " + b, 120,
                          dir + "/b-" + c.tag + ".log");
    const std::string log = read_file(dir + "/b-" + c.tag + ".log");
    ASSERT_EQ(rc, 0) << log;
    EXPECT_NE(log.find("resuming at step 40"), std::string::npos) << log;
    const bool warned = log.find("residuals start again at zero") != std::string::npos;
    EXPECT_EQ(warned, c.drop_residual_files) << c.tag << "\n" << log;
    if (c.drop_residual_files) {
      EXPECT_FALSE(read_file(b + "/model.bin") == want) << "residuals restarted at zero changed nothing";
    } else {
      EXPECT_TRUE(read_file(b + "/model.bin") == want) << c.tag << ": the resumed run differs\n" << log;
    }
  }
  pshard::testing::remove_dir_if_passed(dir);
}

// checkpoint.every_seconds: worker 0 alone decides when, and flags its pushes of that step. Every weights reply after
// that step closed says so (checkpointAt), so worker 1 writes its error-feedback residuals of that step too, and a
// resume from a timed checkpoint is bitwise the uninterrupted run.
TEST(CheckpointResume, ATimedCheckpointOfACompressedJobResumesBitwise) {
  const std::string dir = fresh_dir("ckpt-timed");
  const std::string args =
      " --config " + source_dir() +
      "/configs/linreg_sgd.toml --set data.train_size=2048 --set data.test_size=256 "
      "--set train.batch_size=32 --set train.epochs=20 --set checkpoint.every_seconds=0.05 "
      "--set checkpoint.keep=0 --set cluster.compression=topk --set cluster.compression_ratio=0.25 "
      "--set cluster.compression_min_bytes=0 --set cluster.error_feedback=true";
  const std::string a = dir + "/a", b = dir + "/b";
  int rc = run_with_timeout(pshard_bin() + " launch --servers 1 --workers 2 --timeout 90" + args + " --run-dir " + a,
                            120, dir + "/a.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/a.log");
  const std::string want = read_file(a + "/model.bin");
  ASSERT_FALSE(want.empty());
  // The newest timed checkpoint before the end, with both workers' residuals.
  std::string step;
  for (const auto& e : fs::directory_iterator(a + "/checkpoints")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("server-0.step-", 0) == 0 && name.substr(14, 8) != "00000640" && name.substr(14, 8) > step) {
      step = name.substr(14, 8);
    }
  }
  ASSERT_FALSE(step.empty()) << "no timed checkpoint in a run of 640 steps\n" << read_file(dir + "/a.log");
  for (const char* worker : {"worker-0", "worker-1"}) {
    EXPECT_TRUE(fs::exists(a + "/checkpoints/" + worker + ".step-" + step + ".residuals"))
        << worker << " step " << step;
  }
  copy_run(a, b);
  for (const auto& e : fs::directory_iterator(b + "/checkpoints")) {
    if (e.path().filename().string().find(".step-" + step + ".") == std::string::npos) fs::remove(e.path());
  }
  rc = run_with_timeout(pshard_bin() + " launch --servers 1 --workers 2 --timeout 90 --resume " + b, 120,
                        dir + "/b.log");
  const std::string log = read_file(dir + "/b.log");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("resuming at step " + std::to_string(std::stoll(step))), std::string::npos) << log;
  EXPECT_EQ(log.find("residuals start again at zero"), std::string::npos) << log;
  EXPECT_TRUE(read_file(b + "/model.bin") == want) << "the run resumed at step " << step << " differs\n" << log;
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(CheckpointResume, NoUsableCheckpointIsAClearError) {
  const std::string dir = fresh_dir("ckpt-none");
  fs::create_directories(dir + "/run/checkpoints");
  {
    std::FILE* f = std::fopen((dir + "/run/run-id").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("0123456789abcdef\n", f);
    std::fclose(f);
  }
  {
    std::FILE* f = std::fopen((dir + "/run/config.toml").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(read_file(source_dir() + "/configs/fmnist_mlp_sync.toml").c_str(), f);
    std::fclose(f);
  }
  {
    std::FILE* f = std::fopen((dir + "/run/checkpoints/server-0.step-00000010.ckpt").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("PSHDCKPT but cut short", f);
    std::fclose(f);
  }
  const int rc = run_with_timeout(pshard_bin() + " launch --servers 1 --workers 1 --config " + source_dir() +
                                      "/configs/fmnist_mlp_sync.toml --resume " + dir + "/run",
                                  30, dir + "/log");
  const std::string log = read_file(dir + "/log");
  EXPECT_NE(rc, 0) << log;
  EXPECT_NE(log.find("server-0.step-00000010.ckpt"), std::string::npos) << log;
  EXPECT_NE(log.find("holds no checkpoint of run 0123456789abcdef that all 1 servers have completely"),
            std::string::npos)
      << log;
  pshard::testing::remove_dir_if_passed(dir);
}

// A checkpoint that cannot be written (here RUN_DIR/checkpoints is a file, made once launch has set up the
// fresh run directory: as good as a full disk) is logged with the path, training goes on to the end, and the
// job's exit status says its records are incomplete (74), not success.
TEST(CheckpointWrite, AFailedCheckpointWriteMakesTheJobExitWithRecordsIncomplete) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string dir = fresh_dir("ckpt-unwritable");
  const std::string run = dir + "/run";
  // 20 ms of simulated compute per step: the first checkpoint (step 20) comes well after the run directory.
  BackgroundJob job(pshard_bin() + " launch --servers 1 --workers 1 --timeout 120 --run-dir " + run + job_args(1, 20) +
                        " --set train.simulate_compute_ms=20",
                    dir + "/log");
  ASSERT_TRUE(job.started());
  const auto end = Clock::now() + std::chrono::seconds(60);
  while (!fs::exists(run + "/config.toml") && Clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(fs::exists(run + "/config.toml")) << read_file(dir + "/log");
  ASSERT_FALSE(fs::exists(run + "/checkpoints")) << "the first checkpoint came too early for this test";
  std::ofstream(run + "/checkpoints") << "not a directory\n";
  std::optional<int> rc = job.wait(std::chrono::seconds(150));
  const std::string log = read_file(dir + "/log");
  ASSERT_TRUE(rc.has_value()) << log;
  EXPECT_EQ(*rc, 74) << log;
  EXPECT_NE(log.find("[server 0] error: server 0: checkpoint of step 20 not written: "), std::string::npos) << log;
  // launch names the server, its error line and what the status means.
  EXPECT_NE(log.find("server 0 (pid"), std::string::npos) << log;
  EXPECT_NE(log.find("exited with status 74: server 0: checkpoint of step 20 not written"), std::string::npos) << log;
  EXPECT_NE(log.find("the run's records are incomplete (a write to"), std::string::npos) << log;
  EXPECT_EQ(read_summary(run).at("epochs").as_int(), 1) << log;  // the run itself finished
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(ServerFailure, AbortPolicyEndsTheJobNamingTheDeadServer) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string dir = fresh_dir("server-abort");
  BackgroundJob job(pshard_bin() + " launch --servers 2 --workers 2 --timeout 120" + job_args(3, 20) +
                        " --set cluster.server_failure_policy=abort --run-dir " + dir + "/run",
                    dir + "/log");
  ASSERT_TRUE(job.started());
  const int64_t victim =
      server1_pid_after(dir + "/run", "checkpoints/server-1.step-00000020.ckpt", std::chrono::seconds(60));
  ASSERT_GT(victim, 0) << read_file(dir + "/log");
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  const auto killed = Clock::now();
  // heartbeat timeout 1.5 s + 5 s, plus the launcher's grace period.
  std::optional<int> rc = job.wait(std::chrono::seconds(12));
  ASSERT_TRUE(rc.has_value()) << "the job did not end after a server was killed\n" << read_file(dir + "/log");
  EXPECT_NE(*rc, 0);
  std::printf("job ended %.1f s after the kill\n", std::chrono::duration<double>(Clock::now() - killed).count());
  const std::string log = read_file(dir + "/log");
  EXPECT_NE(log.find("job failed: server 1"), std::string::npos) << log;
  EXPECT_NE(log.find("SIGKILL"), std::string::npos) << log;
  EXPECT_EQ(log.find("restarting the job"), std::string::npos) << log;
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(ServerFailure, RestartPolicyFinishesTheRunFromTheCheckpoint) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string dir = fresh_dir("server-restart");
  // 12800 samples, 2 x 64 per step: 100 steps per epoch, 5 epochs; checkpoints every 50 steps.
  BackgroundJob job(pshard_bin() + " launch --servers 2 --workers 2 --timeout 200" + job_args(5, 50) +
                        " --set data.train_size=12800 --set cluster.server_failure_policy=restart --run-dir " + dir +
                        "/run",
                    dir + "/log");
  ASSERT_TRUE(job.started());
  const int64_t victim =
      server1_pid_after(dir + "/run", "checkpoints/server-1.step-00000150.ckpt", std::chrono::seconds(120));
  ASSERT_GT(victim, 0) << read_file(dir + "/log");
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  std::optional<int> rc = job.wait(std::chrono::seconds(200));
  const std::string log = read_file(dir + "/log");
  ASSERT_TRUE(rc.has_value()) << "the job hung after a server was killed\n" << log;
  EXPECT_EQ(*rc, 0) << log;
  EXPECT_NE(log.find("server 1"), std::string::npos) << log;
  EXPECT_NE(log.find("restarting the job (restart 1 of 3) from the checkpoint of step"), std::string::npos) << log;
  Json summary = read_summary(dir + "/run");
  EXPECT_GT(summary.at("test_acc").as_number(), 0.75) << summary.dump();
  pshard::testing::remove_dir_if_passed(dir);
}

// A frozen server (SIGSTOP: it never exits by itself) is declared dead for its silence and gets the same
// restart policy as one that exited.
TEST(ServerFailure, RestartPolicyRestartsAJobWhoseServerFroze) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string dir = fresh_dir("server-frozen");
  BackgroundJob job(pshard_bin() + " launch --servers 2 --workers 2 --timeout 200 --grace-ms 1000" + job_args(5, 50) +
                        " --set data.train_size=12800 --set cluster.server_failure_policy=restart --run-dir " + dir +
                        "/run",
                    dir + "/log");
  ASSERT_TRUE(job.started());
  const int64_t victim =
      server1_pid_after(dir + "/run", "checkpoints/server-1.step-00000150.ckpt", std::chrono::seconds(120));
  ASSERT_GT(victim, 0) << read_file(dir + "/log");
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGSTOP), 0);
  std::optional<int> rc = job.wait(std::chrono::seconds(200));
  const std::string log = read_file(dir + "/log");
  ASSERT_TRUE(rc.has_value()) << "the job hung after a server froze\n" << log;
  EXPECT_EQ(*rc, 0) << log;
  EXPECT_NE(log.find("restarting the job (restart 1 of 3) from the checkpoint of step"), std::string::npos) << log;
  EXPECT_NE(log.find("[launch] server 1"), std::string::npos) << log;  // the frozen server is named as the cause
  Json summary = read_summary(dir + "/run");
  EXPECT_GT(summary.at("test_acc").as_number(), 0.75) << summary.dump();
  pshard::testing::remove_dir_if_passed(dir);
}

TEST(WorkerJoin, KilledWorkerIsRestartedAndRejoinsTheRunningJob) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST is not installed";
  const std::string dir = fresh_dir("worker-rejoin");
  // 9600 samples / (3 x 64): 50 steps per epoch, 12 epochs: the restarted worker (about a second to start and load its
  // data) rejoins well before the last epoch, which it then trains whole, even when the job runs at 40,000 samples/s.
  BackgroundJob job(pshard_bin() + " launch --servers 2 --workers 3 --timeout 200" + job_args(12, 0) +
                        " --set data.train_size=9600 --set cluster.failure_policy=continue"
                        " --set cluster.restart_workers=true --run-dir " +
                        dir + "/run",
                    dir + "/log");
  ASSERT_TRUE(job.started());
  int64_t victim = -1;
  const auto end = Clock::now() + std::chrono::seconds(60);
  while (victim < 0 && Clock::now() < end) {
    if (read_file(dir + "/run/metrics.jsonl").find("\"event\":\"epoch\"") != std::string::npos) {
      Json map = Json::parse(read_file(dir + "/run/cluster.json"), dir + "/run/cluster.json");
      for (const Json& n : map.at("nodes").elements()) {
        if (n.at("role").as_string() == "worker" && n.at("rank").as_int() == 1) victim = n.at("pid").as_int();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(victim, 0) << read_file(dir + "/log");
  ASSERT_EQ(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  std::optional<int> rc = job.wait(std::chrono::seconds(200));
  const std::string log = read_file(dir + "/log");
  ASSERT_TRUE(rc.has_value()) << "the job hung after a worker was killed\n" << log;
  EXPECT_EQ(*rc, 0) << log;  // the restarted worker finished: the job fully succeeded
  EXPECT_NE(log.find("rejoined the job in place of the dead worker 1"), std::string::npos) << log;
  EXPECT_NE(log.find("rejoining the job at step"), std::string::npos) << log;
  Json summary = read_summary(dir + "/run");
  EXPECT_EQ(summary.at("epochs").as_int(), 12) << summary.dump();
  EXPECT_EQ(summary.at("workers_finished").size(), 3u) << summary.dump();
  EXPECT_GT(summary.at("test_acc").as_number(), 0.75) << summary.dump();
  // The last epoch moved as many bytes as the first: all three workers push and pull again.
  std::vector<Json> epochs;
  const std::string metrics = read_file(dir + "/run/metrics.jsonl");
  size_t pos = 0;
  while ((pos = metrics.find("{\"event\":\"epoch\"", pos)) != std::string::npos) {
    const size_t nl = metrics.find('\n', pos);
    epochs.push_back(Json::parse(metrics.substr(pos, nl - pos), "metrics.jsonl"));
    pos = nl;
  }
  ASSERT_EQ(epochs.size(), 12u);
  // (Through sockets or, on this host, through shared memory: cluster.transport = auto.)
  auto sent = [](const Json& e) { return e.at("bytes_sent").as_number() + e.at("shm_bytes_sent").as_number(); };
  EXPECT_EQ(sent(epochs.back()), sent(epochs.front()));
  EXPECT_GT(sent(epochs.back()), 0.0);
  // The restarted worker shares memory with the servers again: they heard of its registration, so their channels
  // admit its new process for rank 1.
  EXPECT_EQ(epochs.back().at("shm_bytes_sent").as_number(), epochs.front().at("shm_bytes_sent").as_number());
  EXPECT_GT(epochs.back().at("shm_bytes_sent").as_number(), 0.0);
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
