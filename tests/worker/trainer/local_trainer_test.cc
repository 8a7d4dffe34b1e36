// The local trainer: linreg recovers the true w and b, metrics add up, and
// the run is deterministic for a seed.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "common/config/config.h"
#include "common/error.h"
#include "common/metrics/ctr_metrics.h"
#include "worker/data/synthetic.h"
#include "worker/trainer/local_sync.h"
#include "worker/trainer/run_setup.h"
#include "worker/trainer/trainer.h"

namespace {

using namespace pshard;

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

struct TrainedRun {
  std::vector<WorkerEpochReport> epochs;
  std::vector<std::vector<float>> params;
};

TrainedRun train(const Config& cfg) {
  trainer::TrainingSetup setup = trainer::make_training_setup(cfg);
  trainer::TrainerOptions opts = trainer::TrainerOptions::from_config(cfg, 0, 1);
  const int64_t steps = trainer::steps_per_epoch_for(setup.data.train.size(), 1, opts.batch_size) * opts.epochs;
  trainer::LocalSync sync(cfg, opts.batch_size, steps);
  trainer::Trainer t(opts, *setup.model, setup.data, sync);
  TrainedRun run;
  t.run({}, [&](const WorkerEpochReport& r) { run.epochs.push_back(r); });
  for (const models::ParamRef& p : setup.model->params()) run.params.emplace_back(p.value, p.value + p.numel);
  return run;
}

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

const char* kDlrm = R"(
[run]
seed = 3
[data]
name = "synthetic-ctr"
train_size = 200000
test_size = 5000
fields = 4
cardinality = 200
dense_features = 4
[model]
name = "dlrm"
embedding_dim = 16
bottom_hidden = [32]
hidden = [64]
[train]
epochs = 4
batch_size = 128
threads = 1
[optimizer]
name = "adam"
lr = 0.001
[embedding]
optimizer = "adagrad"
lr = 0.05
)";

// pshard's own DLRM on click data, its tables held by the trainer's sync as a server would hold them: the test AUC
// (a figure of each epoch) climbs towards the generator's bound, the bound the run reports is the generator's on the
// same test set, and the figures' log loss is the test loss.
TEST(LocalTrainer, DlrmOnSyntheticClicksApproachesTheBound) {
  const Config cfg = Config::from_string(kDlrm, "dlrm.toml");
  const TrainedRun run = train(cfg);
  const data::DataSplits data = data::load_data(cfg);
  std::vector<float> clicks(data.test.labels.begin(), data.test.labels.end());
  const double bound = auc(data.test.click_prob.data(), clicks.data(), clicks.size());
  ASSERT_EQ(run.epochs.size(), 4u);
  std::vector<double> aucs;
  for (const WorkerEpochReport& e : run.epochs) {
    aucs.push_back(e.figures.at("test_auc"));
    std::printf("epoch %lld: test AUC %.4f (bound %.4f), log loss %.4f\n", static_cast<long long>(e.epoch), aucs.back(),
                bound, e.figures.at("test_logloss"));
    EXPECT_NEAR(e.figures.at("test_logloss"), e.test_loss_sum / static_cast<double>(e.test_n), 1e-4);
    EXPECT_EQ(e.figures.at("test_auc_bound"), bound);
  }
  for (size_t e = 1; e < aucs.size(); ++e) EXPECT_GT(aucs[e], aucs[e - 1]);
  // 0.798 against a bound of 0.826 after 4 epochs (and still climbing): far above the 0.61 the dense features allow.
  EXPECT_GT(aucs.back(), bound - 0.04);
  EXPECT_LE(aucs.back(), bound + 0.01);
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

// A small Criteo file the test writes (data.name = criteo): the label is 1 exactly when the first categorical field's
// hash is odd, so only that field's rows carry the answer; pshard's DLRM learns it through its table.
TEST(LocalTrainer, DlrmLearnsAClickThatOneCriteoFieldDecides) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("pshard-criteo-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  std::mt19937 rng(11);
  for (const char* split : {"train", "test"}) {
    std::ofstream out(dir + "/" + split + ".txt");
    for (int line = 0; line < (std::string(split) == "train" ? 8000 : 2000); ++line) {
      const unsigned c1 = 0x100u + rng() % 40;  // 40 distinct hashes in C1, half of them odd
      out << (c1 % 2);
      for (int j = 0; j < 13; ++j) out << '\t' << rng() % 100;
      for (int j = 0; j < 26; ++j) {
        char hex[9];
        std::snprintf(hex, sizeof(hex), "%08x", j == 0 ? c1 : static_cast<unsigned>(rng() % 1000));
        out << '\t' << hex;
      }
      out << '\n';
    }
  }
  const Config cfg = Config::from_string(
      kDlrm, "dlrm.toml",
      {"data.name=criteo", "data.train_path=" + dir + "/train.txt", "data.test_path=" + dir + "/test.txt",
       "data.cardinality=1000", "data.train_size=0", "data.test_size=0", "train.epochs=3"});
  const TrainedRun run = train(cfg);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(run.epochs.size(), 3u);
  const WorkerEpochReport& last = run.epochs.back();
  EXPECT_EQ(last.test_n, 2000);
  EXPECT_EQ(last.figures.count("test_auc_bound"), 0u);  // a file's labels come with no true probabilities
  std::printf("test AUC %.4f\n", last.figures.at("test_auc"));
  EXPECT_GT(last.figures.at("test_auc"), 0.97);
}

}  // namespace
