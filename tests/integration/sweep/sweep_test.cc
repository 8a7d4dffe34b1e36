// `pshard sweep` on a tiny linear-regression config: one finished run per combination, a summary and a report.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/metrics/metrics_reader.h"
#include "common/util/child_process.h"
#include "tests/support/report_fixtures.h"
#include "tests/support/run_helpers.h"

namespace pshard::report {
namespace {

using testing::pshard_bin;
using testing::read_file;
using testing::TempDir;

const char* kTinyLinreg = R"([run]
name = "tiny"
seed = 3
[data]
name = "synthetic-regression"
features = 4
train_size = 256
test_size = 64
[model]
name = "linreg"
[train]
epochs = 1
batch_size = 16
threads = 1
log_every = 4
[optimizer]
name = "sgd"
lr = 0.01
)";

TEST(SweepIntegration, TrainsOneRunPerCombination) {
  TempDir tmp;
  testing::write_text(tmp.path() + "/tiny.toml", kTinyLinreg);
  std::string out = tmp.path() + "/sweep";
  ChildResult r =
      run_child({pshard_bin(), "sweep", "--config", tmp.path() + "/tiny.toml", "--grid", "optimizer.name=sgd,momentum",
                 "--grid", "optimizer.lr=0.01,0.05", "--set", "train.epochs=2", "--out", out, "--run-timeout", "120"},
                tmp.path() + "/sweep.log", 400);
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << read_file(tmp.path() + "/sweep.log");

  const char* names[] = {"1_name=sgd_lr=0.01", "2_name=sgd_lr=0.05", "3_name=momentum_lr=0.01",
                         "4_name=momentum_lr=0.05"};
  const char* optimizers[] = {"sgd", "sgd", "momentum", "momentum"};
  const char* lrs[] = {"0.01", "0.05", "0.01", "0.05"};
  for (int i = 0; i < 4; ++i) {
    RunMetrics run = read_run(out + "/" + names[i]);
    ASSERT_TRUE(run.summary.has_value()) << names[i];
    EXPECT_EQ(run.summary->epochs, 2) << names[i];
    EXPECT_EQ(run.epochs.size(), 2u) << names[i];
    EXPECT_EQ(run.config.at("optimizer.name"), optimizers[i]);
    EXPECT_EQ(run.config.at("optimizer.lr"), lrs[i]);
    EXPECT_EQ(run.config.at("run.name"), names[i]);
    ASSERT_TRUE(run.summary->train_loss.has_value());
    EXPECT_TRUE(std::isfinite(*run.summary->train_loss));
    if (std::string(optimizers[i]) == "sgd") {  // plain SGD on linear regression: the loss falls
      EXPECT_LT(*run.epochs[1].train_loss, *run.epochs[0].train_loss) << names[i];
    }
  }
  std::string csv = read_file(out + "/sweep.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5) << csv;  // header + 4 runs
  EXPECT_EQ(csv.find("failed"), std::string::npos) << csv;
  std::string report = read_file(out + "/report/report.md");
  EXPECT_NE(report.find("`optimizer.lr`, `optimizer.name`"), std::string::npos) << report;
  EXPECT_NE(report.find("optimizer.lr=0.05, optimizer.name=momentum"), std::string::npos);
}

}  // namespace
}  // namespace pshard::report
