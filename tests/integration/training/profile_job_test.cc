// Profile models through real processes: a 2-worker `pshard launch` of the tests' three-layer profile runs to the
// end with each worker's forward and backward taking the profile's times and every gradient pushed once per step,
// and `pshard bench scaling --profile` runs it at two worker counts.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "tests/support/run_helpers.h"

namespace {

using namespace pshard;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::remove_dir_if_passed;
using pshard::testing::run_with_timeout;
using pshard::testing::source_dir;

// tests/models/profiles/three_layers.json: batch 32, forward 10 + 15 + 20 ms, backward 20 + 30 + 40 ms, 33,562
// parameters in 6 tensors, 10 classes.
std::string three_layers() { return source_dir() + "/tests/models/profiles/three_layers.json"; }
constexpr double kParamBytes = 33562 * 4;

std::vector<Json> events(const std::string& run_dir, const std::string& kind) {
  std::vector<Json> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    Json j = Json::parse(line, run_dir);
    if (j.at("event").as_string() == kind) out.push_back(j);
  }
  return out;
}

TEST(ProfileJob, TwoWorkersThroughTheServersRunToTheEnd) {
  const std::string dir = fresh_dir("profile-job");
  const std::string run = dir + "/run";
  // 2 workers x batch 16 (half the profile's batch: 22.5 ms forward, 45 ms backward per step) over 128 samples:
  // 4 steps each.
  const int rc =
      run_with_timeout(pshard_bin() + " launch --servers 1 --workers 2 --timeout 120 --config " + source_dir() +
                           "/configs/profile_resnet50_sync.toml --set model.profile=" + three_layers() +
                           " --set data.classes=10 --set data.train_size=128 --set data.test_size=16"
                           " --set train.batch_size=16 --set train.log_every=1 --run-dir " +
                           run,
                       150, dir + "/launch.log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/launch.log");
  const std::vector<Json> epochs = events(run, "epoch");
  ASSERT_EQ(epochs.size(), 1u) << read_file(run + "/metrics.jsonl");
  EXPECT_EQ(epochs[0].at("step").as_int(), 4);
  const Json& workers = epochs[0].at("workers");
  ASSERT_EQ(workers.size(), 2u);
  for (const Json& w : workers.elements()) {
    SCOPED_TRACE(w.dump());
    const double forward_ms = w.at("forward_s").as_number() / 4 * 1e3;
    const double backward_ms = w.at("backward_s").as_number() / 4 * 1e3;
    // The profile's times at batch 16 (paced sleeps: at least their sum; late wake-ups add a little).
    EXPECT_GE(forward_ms, 22.5);
    EXPECT_GE(forward_ms + backward_ms, 67.5);
    EXPECT_LT(forward_ms + backward_ms, 67.5 * 2);
    // Every tensor's gradient went to the servers once per step, uncompressed, and its weights came back (those of
    // the last step may still be on their way when the epoch's counters are read).
    // Through sockets or, the servers being on this host (cluster.transport = auto), through shared memory.
    const double sent = w.at("bytes_sent").as_number() + w.at("shm_bytes_sent").as_number();
    const double recv = w.at("bytes_recv").as_number() + w.at("shm_bytes_recv").as_number();
    EXPECT_EQ(sent, 4 * kParamBytes);
    EXPECT_LE(recv, 4 * kParamBytes);
    EXPECT_GE(recv, 3 * kParamBytes);
  }
  // The zero logits give every sample the loss ln 10.
  EXPECT_NEAR(epochs[0].at("train_loss").as_number(), 2.302585, 1e-4);
  const std::string log = read_file(dir + "/launch.log");
  EXPECT_NE(log.find("profile " + three_layers() + ", 33562 parameters"), std::string::npos) << log;
  remove_dir_if_passed(dir);
}

TEST(ProfileJob, BenchScalingTakesAProfile) {
  const std::string dir = fresh_dir("profile-scaling");
  const int rc = run_with_timeout(pshard_bin() + " bench scaling --workers 1,2 --servers 1 --profile " +
                                      three_layers() + " --config " + source_dir() +
                                      "/configs/profile_resnet50_sync.toml --set data.train_size=128"
                                      " --set train.batch_size=16 --run-timeout 120 --out " +
                                      dir + "/out",
                                  300, dir + "/bench.log");
  const std::string log = read_file(dir + "/bench.log");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("profile three-layers (" + three_layers() + "): 33562 parameters in 3 layers"), std::string::npos)
      << log;
  EXPECT_NE(log.find("efficiency"), std::string::npos) << log;  // the scaling table
  // Each run trained the profile model on the profile's classes, with no evaluation.
  for (const char* point : {"/out/1_workers=1", "/out/2_workers=2"}) {
    const std::string config = read_file(dir + point + "/config.toml");
    EXPECT_NE(config.find("name = \"profile\""), std::string::npos) << config;
    EXPECT_NE(config.find("profile = \"" + three_layers() + "\""), std::string::npos) << config;
    EXPECT_NE(config.find("classes = 10"), std::string::npos) << config;
    EXPECT_EQ(events(dir + point, "epoch").size(), 1u) << point;
  }
  // A bad profile is refused before any run starts.
  const int bad =
      run_with_timeout(pshard_bin() + " bench scaling --workers 1 --profile " + dir + "/none.json --config " +
                           source_dir() + "/configs/profile_resnet50_sync.toml --out " + dir + "/bad",
                       60, dir + "/bad.log");
  EXPECT_NE(bad, 0);
  EXPECT_NE(read_file(dir + "/bad.log").find("none.json: cannot open"), std::string::npos)
      << read_file(dir + "/bad.log");
  remove_dir_if_passed(dir);
}

}  // namespace
