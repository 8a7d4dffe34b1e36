// Accuracy targets on the real Fashion-MNIST (Debian dataset-fashion-mnist),
// 10 epochs each: local runs and 2 workers + 2 servers in every mode. The sync
// MLP job (configs/fmnist_mlp_sync.toml, 2 workers + 2 servers, >= 88 %, 10
// epochs) is trained once for the suite, as compression_accuracy_test's float32
// run, which checks this target too.
#include <gtest/gtest.h>

#include <filesystem>

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

// Runs `command_prefix --config configs/<config> --run-dir DIR` and checks the
// summary's test accuracy.
void expect_accuracy(const std::string& name, const std::string& command_prefix, const std::string& config,
                     double min_acc, int timeout_s) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string dir = fresh_dir("acc-" + name);
  const std::string cmd =
      command_prefix + " --config " + source_dir() + "/configs/" + config + " --run-dir " + dir + "/run";
  int rc = run_with_timeout(cmd, timeout_s, dir + "/log");
  ASSERT_EQ(rc, 0) << read_file(dir + "/log");
  Json summary = read_summary(dir + "/run");
  const double acc = summary.at("test_acc").as_number();
  std::printf("%s: test accuracy %.4f (target >= %.3f), %.0f samples/s, %.1f s\n", name.c_str(), acc, min_acc,
              summary.at("samples_per_s").as_number(), summary.at("wall_s").as_number());
  EXPECT_GE(acc, min_acc) << name;
  EXPECT_EQ(summary.at("epochs").as_int(), 10);
  pshard::testing::remove_dir_if_passed(dir);
}

std::string launch() { return pshard_bin() + " launch --servers 2 --workers 2 --timeout 1500"; }

TEST(FashionMnistAccuracy, LocalMlp) {
  expect_accuracy("local-mlp", pshard_bin() + " train", "fmnist_mlp.toml", 0.88, 900);
}

TEST(FashionMnistAccuracy, LocalLenet) {
  expect_accuracy("local-lenet", pshard_bin() + " train", "fmnist_lenet.toml", 0.905, 1500);
}

TEST(FashionMnistAccuracy, AsyncMlpTwoWorkersTwoServers) {
  expect_accuracy("async-mlp", launch(), "fmnist_mlp_async.toml", 0.87, 1560);
}

TEST(FashionMnistAccuracy, SspMlpTwoWorkersTwoServers) {
  expect_accuracy("ssp-mlp", launch(), "fmnist_mlp_ssp.toml", 0.875, 1560);
}

TEST(FashionMnistAccuracy, SyncLenetTwoWorkersTwoServers) {
  expect_accuracy("sync-lenet", launch(), "fmnist_lenet_sync.toml", 0.905, 1560);
}

}  // namespace
