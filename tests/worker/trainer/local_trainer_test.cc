// The local trainer: linreg recovers the true w and b, metrics add up, and
// the run is deterministic for a seed.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "common/config/config.h"
#include "common/error.h"
#include "tests/worker/trainer/local_training.h"
#include "worker/data/synthetic.h"
#include "worker/trainer/local_sync.h"
#include "worker/trainer/run_setup.h"
#include "worker/trainer/trainer.h"

namespace {

using namespace pshard;
using pshard::testing::train;
using pshard::testing::TrainedRun;

const char* kLinreg = R"(
[run]
seed = 7
[data]
name = "synthetic-regression"
features = 10
noise = 0.01
train_size = 8192
test_size = 1024
[model]
name = "linreg"
[train]
epochs = 10
batch_size = 32
threads = 1
[optimizer]
name = "sgd"
lr = 0.01
)";

TEST(LocalTrainer, LinregRecoversTrueWeightsAndBias) {
  Config cfg = Config::from_string(kLinreg, "linreg.toml");
  TrainedRun run = train(cfg);
  data::SyntheticRegression truth = data::synthetic_regression_truth(10, 7);
  ASSERT_EQ(run.params.size(), 2u);  // weight [1, 10], bias [1]
  ASSERT_EQ(run.params[0].size(), 10u);
  for (size_t i = 0; i < 10; ++i) EXPECT_NEAR(run.params[0][i], truth.w[i], 1e-2) << "w[" << i << "]";
  EXPECT_NEAR(run.params[1][0], truth.b, 1e-2);
  // The test loss ends near the noise floor (noise std 0.01 -> mse 1e-4).
  const WorkerEpochReport& last = run.epochs.back();
  EXPECT_LT(last.test_loss_sum / last.test_n, 5e-4);
}

TEST(LocalTrainer, EpochReportsAddUp) {
  Config cfg = Config::from_string(kLinreg, "linreg.toml", {"train.epochs=2", "train.batch_size=100"});
  TrainedRun run = train(cfg);
  ASSERT_EQ(run.epochs.size(), 2u);
  for (const WorkerEpochReport& r : run.epochs) {
    EXPECT_EQ(r.samples, 81 * 100);  // floor(8192 / 100) full batches
    EXPECT_EQ(r.test_n, 1024);
    EXPECT_TRUE(r.evaluated);
    EXPECT_FALSE(r.has_train_acc);
    EXPECT_FALSE(r.has_test_acc);
  }
  EXPECT_EQ(run.epochs[1].step, 162);
  EXPECT_LT(run.epochs[1].loss_sum, run.epochs[0].loss_sum);
}

TEST(LocalTrainer, SameSeedSameWeights) {
  Config cfg = Config::from_string(kLinreg, "linreg.toml", {"train.epochs=1"});
  TrainedRun a = train(cfg);
  TrainedRun b = train(cfg);
  EXPECT_EQ(a.params, b.params);
}

// Resumed exactly at the end of the run (a restart after the last step): nothing is trained, but the last epoch is
// still evaluated and reported, so the resumed records end in an epoch line.
TEST(LocalTrainer, AResumeAtTheLastStepEvaluatesAndReportsTheLastEpoch) {
  Config cfg = Config::from_string(kLinreg, "linreg.toml");
  TrainedRun full = train(cfg);
  trainer::TrainingSetup setup = trainer::make_training_setup(cfg);
  trainer::TrainerOptions opts = trainer::TrainerOptions::from_config(cfg, 0, 1);
  const int64_t steps = trainer::steps_per_epoch_for(setup.data.train.size(), 1, opts.batch_size) * opts.epochs;
  opts.start_step = steps;
  trainer::LocalSync sync(cfg, opts.batch_size, steps);
  trainer::Trainer t(opts, *setup.model, setup.data, sync);
  std::vector<WorkerEpochReport> reports;
  t.run({}, [&](const WorkerEpochReport& r) { reports.push_back(r); });
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].epoch, 10);
  EXPECT_EQ(reports[0].step, steps);
  EXPECT_EQ(reports[0].samples, 0);
  EXPECT_TRUE(reports[0].evaluated);
  EXPECT_GT(reports[0].test_n, 0);
  EXPECT_EQ(full.epochs.back().step, steps);
}

TEST(ComputeThreads, ZeroSharesTheAllowedCoresAmongTheWorkersOfTheHost) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  const int cores = CPU_COUNT(&allowed);
  const Config automatic = Config::from_string(kLinreg, "linreg.toml", {"train.threads=0"});
  ::unsetenv("PSHARD_WORKERS_ON_HOST");
  EXPECT_EQ(trainer::compute_threads(automatic), cores);
  EXPECT_EQ(trainer::compute_threads(Config::from_string(kLinreg, "linreg.toml", {"train.threads=3"})), 3);
  ::setenv("PSHARD_WORKERS_ON_HOST", "2", 1);
  EXPECT_EQ(trainer::compute_threads(automatic), std::max(1, cores / 2));
  ::setenv("PSHARD_WORKERS_ON_HOST", "100000", 1);
  EXPECT_EQ(trainer::compute_threads(automatic), 1);  // more workers than cores: one thread each
  for (const char* bad : {"0", "two", "2x", "-1"}) {
    ::setenv("PSHARD_WORKERS_ON_HOST", bad, 1);
    try {
      trainer::compute_threads(automatic);
      ADD_FAILURE() << "accepted PSHARD_WORKERS_ON_HOST=" << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("PSHARD_WORKERS_ON_HOST must be a positive integer"), std::string::npos)
          << e.what();
    }
  }
  ::unsetenv("PSHARD_WORKERS_ON_HOST");
}

TEST(LocalTrainer, TooLittleDataIsAClearError) {
  Config cfg = Config::from_string(kLinreg, "linreg.toml", {"data.train_size=10", "train.batch_size=32"});
  try {
    train(cfg);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than one global batch"), std::string::npos) << e.what();
  }
}

TEST(LocalTrainer, DivergenceStopsTheRunWithTheReason) {
  Config cfg = Config::from_string(kLinreg, "linreg.toml", {"optimizer.lr=1000", "train.epochs=3"});
  try {
    train(cfg);
    FAIL() << "a learning rate of 1000 did not diverge";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("training diverged: the loss of step"), std::string::npos) << what;
    EXPECT_NE(what.find("epoch 1"), std::string::npos) << what;  // stops early, not after 3 epochs
    EXPECT_NE(what.find("lower optimizer.lr"), std::string::npos) << what;
  }
}

TEST(LocalTrainer, DlrmWithoutCategoricalFieldsIsAClearError) {
  const Config cfg = Config::from_string(kLinreg, "linreg.toml", {"model.name=dlrm"});
  try {
    train(cfg);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.name = synthetic-ctr"), std::string::npos) << e.what();
  }
}

}  // namespace
