// fp16 training with dynamic loss scaling through real processes (pshard launch, 2 workers + 2 servers on
// Fashion-MNIST): the workers skip the same steps (a step some worker's gradients overflowed is skipped by the servers
// for all, each push saying whether its worker's were finite), the scale backs off until half holds the gradients,
// the model learns, and the wire carries fp16 weights and float32 gradients. Async workers skip their own such steps
// alone, and the job still ends well. A float32 job with a power-of-two scale trains the same model as one without.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "tests/support/run_helpers.h"

namespace {

using namespace pshard;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::read_summary;
using pshard::testing::run_with_timeout;
using pshard::testing::source_dir;

TEST(LossScalingJob, Fp16WorkersSkipTheSameStepsAndLearn) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const std::string dir = fresh_dir("loss-scaling-job");
  // A scale of 10^12 overflows half at once: the first steps are skipped on both workers until it has halved enough.
  const std::string cmd = pshard_bin() + " launch --servers 2 --workers 2 --timeout 300 --config " + source_dir() +
                          "/configs/fmnist_mlp_sync.toml --set train.epochs=1 --set train.precision=fp16 --set "
                          "train.loss_scale=1e12 --set train.log_every=0 --set cluster.transport=tcp --run-dir " +
                          dir + "/run";
  const int rc = run_with_timeout(cmd, 360, dir + "/log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/log");

  std::map<int64_t, std::set<int64_t>> skipped;  // rank -> data steps it skipped
  Json epoch;
  std::istringstream lines(read_file(dir + "/run/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const Json j = Json::parse(line, "metrics.jsonl");
    const std::string event = j.at("event").as_string();
    if (event == "step" && j.has("skipped") && j.at("skipped").as_bool()) {
      skipped[j.at("rank").as_int()].insert(j.at("step").as_int());
    }
    if (event == "epoch") epoch = j;
  }
  ASSERT_EQ(skipped.size(), 2u) << "both workers should log skipped steps";
  EXPECT_EQ(skipped[0], skipped[1]) << "the workers skipped different steps";
  EXPECT_GE(skipped[0].size(), 5u);
  EXPECT_LE(skipped[0].size(), 40u);
  ASSERT_TRUE(epoch.has("loss_scale")) << epoch.dump();
  EXPECT_EQ(epoch.at("skipped_steps").as_int(), static_cast<int64_t>(skipped[0].size()));
  EXPECT_LT(epoch.at("loss_scale").as_number(), 1e12 / 16);
  // fp16 pulls (half the float32 bytes, but for the initial weights, pulled in float32 once), float32 pushes
  // (unscaled gradients below half's range would be lost).
  EXPECT_NEAR(epoch.at("bytes_recv").as_number() / epoch.at("fp32_bytes_recv").as_number(), 0.5, 0.002);
  EXPECT_DOUBLE_EQ(epoch.at("bytes_sent").as_number(), epoch.at("fp32_bytes_sent").as_number());
  const Json summary = read_summary(dir + "/run");
  EXPECT_GT(summary.at("test_acc").as_number(), 0.80) << summary.dump();
  EXPECT_EQ(summary.at("skipped_steps").as_int(), static_cast<int64_t>(skipped[0].size()));
  std::printf("fp16 sync MLP, 1 epoch: %zu steps skipped, loss scale %.6g, test accuracy %.4f\n", skipped[0].size(),
              epoch.at("loss_scale").as_number(), summary.at("test_acc").as_number());
  pshard::testing::remove_dir_if_passed(dir);
}

// Async: each worker skips its own overflowed steps (nothing of them is pushed), so the workers push different numbers
// of steps; the job still ends well (the coordinator's check that no worker left short does not count them).
TEST(LossScalingJob, AsyncWorkersSkipTheirOwnStepsAndTheJobEndsWell) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const std::string dir = fresh_dir("loss-scaling-async");
  const std::string cmd = pshard_bin() + " launch --servers 1 --workers 2 --timeout 300 --config " + source_dir() +
                          "/configs/fmnist_mlp_sync.toml --set cluster.mode=async --set train.epochs=1 --set "
                          "data.train_size=12800 --set train.precision=fp16 --set train.loss_scale=1e12 --set "
                          "train.log_every=0 --run-dir " +
                          dir + "/run";
  const int rc = run_with_timeout(cmd, 360, dir + "/log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/log");
  std::map<int64_t, int64_t> skipped;  // rank -> steps it skipped
  std::istringstream lines(read_file(dir + "/run/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const Json j = Json::parse(line, "metrics.jsonl");
    if (j.at("event").as_string() == "step" && j.has("skipped") && j.at("skipped").as_bool()) {
      ++skipped[j.at("rank").as_int()];
    }
  }
  ASSERT_EQ(skipped.size(), 2u) << "both workers should skip their first steps at scale 10^12";
  EXPECT_GE(skipped[0], 5);
  EXPECT_GE(skipped[1], 5);
  // The job's figure: the most steps a worker skipped (in a sync job, the steps every worker skipped).
  EXPECT_EQ(read_summary(dir + "/run").at("skipped_steps").as_int(), std::max(skipped[0], skipped[1]));
  pshard::testing::remove_dir_if_passed(dir);
}

// A float32 job with a static power-of-two scale trains the model a job without scaling trains, byte for byte:
// unscaling is exact, every step is voted applied, and the pushes that wait for the vote carry the same sums.
TEST(LossScalingJob, AStaticPowerOfTwoScaleTrainsTheSameModelAsNone) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  const std::string dir = fresh_dir("loss-scaling-static");
  for (const char* scaling : {"none", "static"}) {
    const std::string cmd = pshard_bin() + " launch --servers 2 --workers 2 --timeout 300 --config " + source_dir() +
                            "/configs/fmnist_mlp_sync.toml --set train.epochs=1 --set train.loss_scaling=" + scaling +
                            " --run-dir " + dir + "/" + scaling;
    ASSERT_EQ(run_with_timeout(cmd, 360, dir + "/log"), 0) << read_file(dir + "/log");
  }
  const std::string plain = read_file(dir + "/none/model.bin"), scaled = read_file(dir + "/static/model.bin");
  EXPECT_GT(plain.size(), 100000u);
  EXPECT_TRUE(plain == scaled) << "the scaled job's model differs";
  const Json summary = read_summary(dir + "/static");
  EXPECT_EQ(summary.at("loss_scale").as_number(), 65536.0);
  EXPECT_EQ(summary.at("skipped_steps").as_int(), 0);
  pshard::testing::remove_dir_if_passed(dir);
}

}  // namespace
