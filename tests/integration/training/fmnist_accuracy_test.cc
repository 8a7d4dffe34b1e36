// Accuracy targets on the real Fashion-MNIST (Debian dataset-fashion-mnist),
// 10 epochs each: local runs and 2 workers + 2 servers in every mode. The sync
// MLP job (configs/fmnist_mlp_sync.toml, 2 workers + 2 servers, >= 88 %, 10
// epochs) is trained once for the suite, as compression_accuracy_test's float32
// run, which checks this target too; the sync LeNet job is the anchor of its bf16
// run (train.precision = bf16, within 0.3 points).
#include <gtest/gtest.h>

#include <filesystem>
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

bool have_fashion_mnist() {
  return std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

// Runs `command_prefix --config configs/<config> [settings] --run-dir DIR`, checks the summary's test accuracy and
// returns it (-1 when the run failed).
double expect_accuracy(const std::string& name, const std::string& command_prefix, const std::string& config,
                       double min_acc, int timeout_s, const std::string& settings = "") {
  const std::string dir = fresh_dir("acc-" + name);
  const std::string cmd = command_prefix + " --config " + source_dir() + "/configs/" + config + " " + settings +
                          " --run-dir " + dir + "/run";
  int rc = run_with_timeout(cmd, timeout_s, dir + "/log");
  EXPECT_EQ(rc, 0) << read_file(dir + "/log");
  if (rc != 0) return -1;
  Json summary = read_summary(dir + "/run");
  const double acc = summary.at("test_acc").as_number();
  std::printf("%s: test accuracy %.4f (target >= %.3f), %.0f samples/s, %.1f s\n", name.c_str(), acc, min_acc,
              summary.at("samples_per_s").as_number(), summary.at("wall_s").as_number());
  EXPECT_GE(acc, min_acc) << name;
  EXPECT_EQ(summary.at("epochs").as_int(), 10);
  pshard::testing::remove_dir_if_passed(dir);
  return acc;
}

std::string launch() { return pshard_bin() + " launch --servers 2 --workers 2 --timeout 1500"; }

class FashionMnistAccuracy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  // The float32 sync LeNet job (2 workers + 2 servers), trained once for the suite: its own target, and the anchor of
  // the bf16 run.
  static double sync_lenet() {
    static const double acc = expect_accuracy("sync-lenet", launch(), "fmnist_lenet_sync.toml", 0.905, 1560);
    return acc;
  }
};

TEST_F(FashionMnistAccuracy, LocalMlp) {
  expect_accuracy("local-mlp", pshard_bin() + " train", "fmnist_mlp.toml", 0.88, 900);
}

TEST_F(FashionMnistAccuracy, LocalLenet) {
  expect_accuracy("local-lenet", pshard_bin() + " train", "fmnist_lenet.toml", 0.905, 1500);
}

TEST_F(FashionMnistAccuracy, AsyncMlpTwoWorkersTwoServers) {
  expect_accuracy("async-mlp", launch(), "fmnist_mlp_async.toml", 0.87, 1560);
}

TEST_F(FashionMnistAccuracy, SspMlpTwoWorkersTwoServers) {
  expect_accuracy("ssp-mlp", launch(), "fmnist_mlp_ssp.toml", 0.875, 1560);
}

TEST_F(FashionMnistAccuracy, SyncLenetTwoWorkersTwoServers) { EXPECT_GE(sync_lenet(), 0.905); }

// train.precision = bf16 (bf16 convolutions and GEMMs, bf16 pushes and pulls): within 0.3 points of float32.
TEST_F(FashionMnistAccuracy, SyncLenetBf16WithinPointThreeOfFp32) {
  // bf16 compute needs oneDNN's bf16 kernels (AVX-512); on an AVX2-only CPU the workers refuse the config.
  if (const std::string missing = pshard::models::cpu::bf16_kernels_missing(); !missing.empty()) {
    GTEST_SKIP() << missing;
  }
  const double bf16 =
      expect_accuracy("sync-lenet-bf16", launch(), "fmnist_lenet_sync.toml", 0.905, 1560, "--set train.precision=bf16");
  EXPECT_NEAR(bf16, sync_lenet(), 0.003);
}

}  // namespace
