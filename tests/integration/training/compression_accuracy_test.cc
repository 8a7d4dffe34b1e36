// Compression against float32 on the real Fashion-MNIST: the MLP, sync, 2 workers + 2 servers, 10 epochs
// (configs/fmnist_mlp_sync.toml). bf16 pushes stay within half a point of none, fp16 both ways within 0.3, topk 1 %
// with error feedback within 1.5 points, onebit with error feedback reaches 85 %; and the bytes each run moved, as its
// last epoch measured them, are what the encoding promises (bf16/fp16: half of float32; topk 1 %: <= 3 % of the
// pushes); bf16 compute (train.precision) within 0.3 points at half the bytes both ways. 6 runs of 10 epochs:
// 1:24-2:12 on the shared 2-core VM at load 12 for the first 5 (each run 12-40 s).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>

#include "models/cpu/onednn.h"
#include "tests/support/run_helpers.h"

namespace {

using namespace pshard;
using pshard::testing::fresh_dir;
using pshard::testing::pshard_bin;
using pshard::testing::read_file;
using pshard::testing::read_summary;
using pshard::testing::run_with_timeout;
using pshard::testing::source_dir;

struct Outcome {
  double test_acc = 0;
  int64_t epochs = 0;
  Json last_epoch;
};

// One run of fmnist_mlp_sync.toml with `settings` (--set arguments); fails the test when the job fails. Over TCP
// (cluster.transport = tcp): the bytes compared are the ones on the wire, which shared memory would leave out for
// the float32 payloads only.
Outcome train(const std::string& name, const std::string& settings) {
  const std::string dir = fresh_dir("compress-" + name);
  const std::string cmd = pshard_bin() + " launch --servers 2 --workers 2 --timeout 600 --config " + source_dir() +
                          "/configs/fmnist_mlp_sync.toml --set cluster.transport=tcp " + settings + " --run-dir " +
                          dir + "/run";
  const int rc = run_with_timeout(cmd, 660, dir + "/log");
  EXPECT_EQ(rc, 0) << read_file(dir + "/log");
  Outcome o;
  if (rc != 0) return o;
  const Json summary = read_summary(dir + "/run");
  o.test_acc = summary.at("test_acc").as_number();
  o.epochs = summary.at("epochs").as_int();
  std::istringstream lines(read_file(dir + "/run/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    Json j = Json::parse(line, "metrics.jsonl");
    if (j.has("event") && j.at("event").as_string() == "epoch") o.last_epoch = j;
  }
  std::printf("%s: test accuracy %.4f, last epoch bytes sent %.0f (float32 %.0f), received %.0f (float32 %.0f)\n",
              name.c_str(), o.test_acc, o.last_epoch.at("bytes_sent").as_number(),
              o.last_epoch.at("fp32_bytes_sent").as_number(), o.last_epoch.at("bytes_recv").as_number(),
              o.last_epoch.at("fp32_bytes_recv").as_number());
  pshard::testing::remove_dir_if_passed(dir);
  return o;
}

double sent_ratio(const Outcome& o) {
  return o.last_epoch.at("bytes_sent").as_number() / o.last_epoch.at("fp32_bytes_sent").as_number();
}
double recv_ratio(const Outcome& o) {
  return o.last_epoch.at("bytes_recv").as_number() / o.last_epoch.at("fp32_bytes_recv").as_number();
}

class CompressionAccuracy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "dataset-fashion-mnist is not installed";
    }
  }
  // The float32 run every codec is compared with, trained once for the whole suite; it is also
  // fmnist_accuracy_test's sync MLP target (2 workers + 2 servers, 10 epochs, >= 88 %).
  static const Outcome& none() {
    static const Outcome o = train("none", "");
    return o;
  }
};

TEST_F(CompressionAccuracy, NoneMovesExactlyItsFloat32Volume) {
  ASSERT_GT(none().test_acc, 0.88);
  EXPECT_EQ(none().epochs, 10);
  EXPECT_EQ(sent_ratio(none()), 1.0);
  EXPECT_EQ(recv_ratio(none()), 1.0);
}

// cluster.compression = bf16: the pushes at half the bytes, the pulls float32, within half a point of none. (One
// 10-epoch run's accuracy moves by about half a point with the trajectory: bf16 pulls as well land 0.53 points below
// none at seed 1 and 0.14 above it at seed 2, docs/PERFORMANCE.md has the runs; and bf16 pushes, within 0.3 points
// where oneDNN runs AVX-512 kernels, land 0.32 below on an AVX2-only CPU, 0.8919 against 0.8951, 2026-11-30.)
TEST_F(CompressionAccuracy, Bf16PushesWithinHalfAPointOfNoneAtHalfTheBytes) {
  const Outcome o = train("bf16", "--set cluster.compression=bf16");
  EXPECT_NEAR(o.test_acc, none().test_acc, 0.005);
  // Half of float32, plus the biases under compression_min_bytes that stay float32 (1.4 KB of 0.94 MB).
  EXPECT_GE(sent_ratio(o), 0.5);
  EXPECT_LE(sent_ratio(o), 0.502);
  EXPECT_EQ(recv_ratio(o), 1.0);
}

// fp16 both ways: pushes and pulls at half the bytes.
TEST_F(CompressionAccuracy, Fp16BothWaysWithinPointThreeOfNoneAtHalfTheBytes) {
  const Outcome o = train("fp16", "--set cluster.compression=fp16 --set cluster.pull_precision=fp16");
  EXPECT_NEAR(o.test_acc, none().test_acc, 0.003);
  EXPECT_GE(sent_ratio(o), 0.5);
  EXPECT_LE(sent_ratio(o), 0.502);
  EXPECT_GE(recv_ratio(o), 0.5);
  EXPECT_LE(recv_ratio(o), 0.502);
}

// train.precision = bf16: bf16 convolutions and GEMMs on the workers, and by default bf16 pushes and pulls (half
// the bytes both ways, the biases under compression_min_bytes excepted); the servers' weights stay float32.
TEST_F(CompressionAccuracy, Bf16ComputeWithinPointThreeOfNoneAtHalfTheBytes) {
  // bf16 compute needs oneDNN's bf16 kernels (AVX-512); on an AVX2-only CPU the workers refuse the config.
  if (const std::string missing = pshard::models::cpu::bf16_kernels_missing(); !missing.empty()) {
    GTEST_SKIP() << missing;
  }
  const Outcome o = train("bf16-compute", "--set train.precision=bf16");
  EXPECT_NEAR(o.test_acc, none().test_acc, 0.003);
  EXPECT_EQ(o.epochs, 10);
  EXPECT_GE(sent_ratio(o), 0.5);
  EXPECT_LE(sent_ratio(o), 0.502);
  EXPECT_GE(recv_ratio(o), 0.5);
  EXPECT_LE(recv_ratio(o), 0.502);
}

TEST_F(CompressionAccuracy, TopkOnePercentWithErrorFeedbackWithinOnePointFive) {
  const Outcome o = train("topk", "--set cluster.compression=topk --set cluster.compression_ratio=0.01");
  EXPECT_NEAR(o.test_acc, none().test_acc, 0.015);
  EXPECT_LE(sent_ratio(o), 0.03);  // 8 bytes per value sent (index and value) for 1 % of 4: 2 %, plus the biases
  EXPECT_EQ(recv_ratio(o), 1.0);   // pulls stay float32
}

// At the config's lr (0.05, x2 by the linear scaling rule, momentum 0.9) onebit diverges in epoch 1: one scale per
// slice spreads a slice's mean magnitude over every element, so the many near-zero gradients of fc1 (border pixels)
// each move by the mean, and the residual feeds it back with the opposite sign. A 5x lower lr trains it.
TEST_F(CompressionAccuracy, OnebitWithErrorFeedbackConverges) {
  const Outcome o = train("onebit", "--set cluster.compression=onebit --set optimizer.lr=0.01");
  EXPECT_GE(o.test_acc, 0.85);
  EXPECT_LE(sent_ratio(o), 0.04);  // 1 bit of 32, a scale per slice, the biases
}

}  // namespace
