// Loss scaling (train.loss_scaling): the scale's rule, unscaling, and the trainer's skipped steps, which leave the
// weights bit for bit as they were and keep the servers' step number.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "common/config/config.h"
#include "common/error.h"
#include "models/model.h"
#include "worker/trainer/local_sync.h"
#include "worker/trainer/loss_scaler.h"
#include "worker/trainer/run_setup.h"
#include "worker/trainer/trainer.h"

namespace {

using namespace pshard;
using trainer::LossScaler;

const char* kMlp = R"(
[run]
seed = 3
[data]
name = "synthetic-images"
image_shape = [1, 8, 8]
classes = 4
train_size = 1024
test_size = 256
[model]
name = "mlp"
hidden = [32]
[train]
epochs = 2
batch_size = 32
threads = 1
log_every = 1
[optimizer]
name = "momentum"
lr = 0.05
momentum = 0.9
)";

TEST(LossScaler, DynamicHalvesOnASkipAndDoublesAfterTheGrowthInterval) {
  LossScaler s(LossScaler::Mode::kDynamic, 1024.0f, 3);
  s.update(false);
  EXPECT_EQ(s.scale(), 512.0f);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 512.0f);
  s.update(true);  // the third clean step in a row
  EXPECT_EQ(s.scale(), 1024.0f);
  s.update(true);
  s.update(true);
  s.update(false);  // a skip resets the count of clean steps
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.skipped(), 2);

  LossScaler fixed(LossScaler::Mode::kStatic, 128.0f, 1);
  fixed.update(false);
  fixed.update(true);
  EXPECT_EQ(fixed.scale(), 128.0f);
  EXPECT_EQ(fixed.skipped(), 1);
  EXPECT_FALSE(LossScaler().active());
}

TEST(LossScaler, ARunThatSkipsStepAfterStepEndsWithTheReason) {
  LossScaler fixed(LossScaler::Mode::kStatic, 4.0f, 1);
  for (int i = 0; i < 99; ++i) fixed.update(false);
  try {
    fixed.update(false);
    FAIL() << "a hundredth skipped step in a row went on";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("training diverged: 100 steps in a row were skipped"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("at loss scale 4 (train.loss_scaling = static)"), std::string::npos)
        << e.what();  // a static scale did not go "down"
  }
  LossScaler dynamic(LossScaler::Mode::kDynamic, 1.0f, 10);
  for (int i = 0; i < 24; ++i) dynamic.update(false);  // 2^-24: the floor
  try {
    dynamic.update(false);
    FAIL() << "a scale below 2^-24 went on";
  } catch (const Error& e) {  // printed as a number, not as "0.000000"
    EXPECT_NE(std::string(e.what()).find("at loss scale down to 2.98023e-08"), std::string::npos) << e.what();
  }
}

TEST(LossScaler, UnscalesExactlyAndFindsNonFiniteValues) {
  std::vector<float> g1 = {65536.0f, -3.0f * 65536.0f, 0.5f}, g2 = {1.0f, 2.0f};
  std::vector<float> v1(3), v2(2);
  std::vector<models::ParamRef> params(2);
  params[0].grad = g1.data();
  params[0].numel = 3;
  params[0].value = v1.data();
  params[1].grad = g2.data();
  params[1].numel = 2;
  params[1].value = v2.data();
  LossScaler s(LossScaler::Mode::kDynamic, 65536.0f, 10);
  const auto cpu = models::make_cpu_backend(1);
  EXPECT_TRUE(s.unscale(*cpu, params));
  EXPECT_EQ(g1[0], 1.0f);
  EXPECT_EQ(g1[1], -3.0f);
  EXPECT_EQ(g1[2], 0.5f / 65536.0f);
  g2[1] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(s.unscale(*cpu, params));
  g2[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(s.unscale(*cpu, params));
  params[1].frozen = true;  // frozen parameters are neither unscaled nor checked
  g1 = {1.0f, 2.0f, 3.0f};
  EXPECT_TRUE(s.unscale(*cpu, params));
}

// A local sync whose workers' vote says "skip" at the chosen steps, as when another worker's gradients were not
// finite; records the step numbers it is given and the weights it started each step with.
class VotingSync : public trainer::LocalSync {
 public:
  VotingSync(const Config& cfg, int64_t batch, int64_t steps, std::set<int64_t> skip_at)
      : LocalSync(cfg, batch, steps), skip_at_(std::move(skip_at)) {}
  void start(models::Model& model) override {
    model_ = &model;
    LocalSync::start(model);
  }
  void begin_step(int64_t step) override {
    begun.push_back(step);
    weights_at_begin.push_back(weights());
    LocalSync::begin_step(step);
  }
  bool finish_scaled(bool finite, int params) override {
    local_votes.push_back(finite);
    const bool applied = finite && skip_at_.count(static_cast<int64_t>(begun.size()) - 1) == 0;
    if (applied) grads_ready(0, params);
    return applied;
  }
  void skip_step(int64_t step) override {
    skipped.push_back(step);
    LocalSync::skip_step(step);
  }
  std::vector<float> weights() const {
    std::vector<float> w;
    for (const models::ParamRef& p : model_->params()) w.insert(w.end(), p.value, p.value + p.numel);
    return w;
  }

  std::vector<int64_t> begun, skipped;
  std::vector<bool> local_votes;
  std::vector<std::vector<float>> weights_at_begin;

 private:
  std::set<int64_t> skip_at_;
  models::Model* model_ = nullptr;
};

struct TrainedRun {
  std::vector<trainer::StepEvent> steps;
  std::vector<WorkerEpochReport> epochs;
  std::vector<float> weights;
};

TrainedRun train(const Config& cfg, VotingSync* sync_out = nullptr, std::set<int64_t> skip_at = {}) {
  trainer::TrainingSetup setup = trainer::make_training_setup(cfg);
  trainer::TrainerOptions opts = trainer::TrainerOptions::from_config(cfg, 0, 1);
  const int64_t steps = trainer::steps_per_epoch_for(setup.data.train.size(), 1, opts.batch_size) * opts.epochs;
  VotingSync own(cfg, opts.batch_size, steps, std::move(skip_at));
  VotingSync& sync = sync_out ? *sync_out : own;
  trainer::Trainer t(opts, *setup.model, setup.data, sync);
  TrainedRun run;
  t.run([&](const trainer::StepEvent& s) { run.steps.push_back(s); },
        [&](const WorkerEpochReport& r) { run.epochs.push_back(r); });
  run.weights = sync.weights();
  return run;
}

// A step the workers' vote skips leaves every weight as it was (the optimizer's state too: the step after it is
// the step that would have come), keeps the step number, halves the scale, and is counted in the epoch's report.
TEST(LossScaling, ASkippedStepLeavesTheWeightsAndTheStepNumber) {
  const Config cfg = Config::from_string(kMlp, "mlp.toml", {"train.loss_scaling=dynamic", "train.loss_scale=1024"});
  trainer::TrainingSetup probe = trainer::make_training_setup(cfg);
  const int64_t per_epoch = trainer::steps_per_epoch_for(probe.data.train.size(), 1, 32);
  VotingSync sync(cfg, 32, per_epoch * 2, {5, 6});
  const TrainedRun run = train(cfg, &sync, {5, 6});
  ASSERT_EQ(sync.begun.size(), static_cast<size_t>(per_epoch * 2));
  // Data steps 5 and 6 were skipped: the sync saw steps 0..5, then 5 twice more, then 6 on.
  EXPECT_EQ(sync.begun[4], 4);
  EXPECT_EQ(sync.begun[5], 5);
  EXPECT_EQ(sync.begun[6], 5);
  EXPECT_EQ(sync.begun[7], 5);
  EXPECT_EQ(sync.begun[8], 6);
  EXPECT_EQ(sync.skipped, (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(sync.weights_at_begin[5], sync.weights_at_begin[6]);
  EXPECT_EQ(sync.weights_at_begin[6], sync.weights_at_begin[7]);
  EXPECT_NE(sync.weights_at_begin[7], sync.weights_at_begin[8]);
  for (bool v : sync.local_votes) EXPECT_TRUE(v);  // this worker's gradients were finite throughout
  ASSERT_GT(run.steps.size(), 8u);
  EXPECT_EQ(run.steps[5].loss_scale, 1024.0);
  EXPECT_TRUE(run.steps[5].skipped);
  EXPECT_EQ(run.steps[6].loss_scale, 512.0);
  EXPECT_TRUE(run.steps[6].skipped);
  EXPECT_EQ(run.steps[7].loss_scale, 256.0);
  EXPECT_FALSE(run.steps[7].skipped);
  ASSERT_EQ(run.epochs.size(), 2u);
  EXPECT_TRUE(run.epochs[0].has_loss_scale);
  EXPECT_EQ(run.epochs[0].skipped_steps, 2);
  EXPECT_EQ(run.epochs[1].skipped_steps, 0);
  EXPECT_EQ(run.epochs[1].loss_scale, 256.0);
  EXPECT_EQ(run.epochs[1].step, per_epoch * 2);  // data steps: every batch was trained on or skipped
}

// Scaling by a power of two that nothing overflows changes no bit: a static scale of 2^16 in float32 trains the
// same weights as no scaling, and a dynamic one that never skips too.
TEST(LossScaling, APowerOfTwoScaleTrainsTheSameWeightsBitForBit) {
  const TrainedRun plain = train(Config::from_string(kMlp, "mlp.toml"));
  const TrainedRun fixed = train(Config::from_string(kMlp, "mlp.toml", {"train.loss_scaling=static"}));
  const TrainedRun dynamic = train(Config::from_string(
      kMlp, "mlp.toml", {"train.loss_scaling=dynamic", "train.loss_scale=256", "train.loss_scale_growth_interval=7"}));
  ASSERT_EQ(plain.weights.size(), fixed.weights.size());
  EXPECT_EQ(std::memcmp(plain.weights.data(), fixed.weights.data(), plain.weights.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(plain.weights.data(), dynamic.weights.data(), plain.weights.size() * sizeof(float)), 0);
  EXPECT_FALSE(plain.epochs.back().has_loss_scale);
  EXPECT_EQ(fixed.epochs.back().loss_scale, 65536.0);
  // 64 clean steps with growth every 7: 256 x 2^9.
  EXPECT_EQ(dynamic.epochs.back().loss_scale, 256.0 * 512.0);
}

// fp16 compute with the default dynamic scaling: a scale far too large for half overflows the first steps, which
// are skipped until it fits, then the model trains as well as in float32.
TEST(LossScaling, Fp16TrainingBacksOffAnOverflowingScaleAndLearns) {
  const TrainedRun fp32 = train(Config::from_string(kMlp, "mlp.toml", {"train.epochs=4"}));
  const TrainedRun fp16 =
      train(Config::from_string(kMlp, "mlp.toml", {"train.epochs=4", "train.precision=fp16", "train.loss_scale=1e12"}));
  ASSERT_EQ(fp16.epochs.size(), 4u);
  EXPECT_GT(fp16.epochs[0].skipped_steps, 5);
  EXPECT_EQ(fp16.epochs[3].skipped_steps, 0);
  EXPECT_LT(fp16.epochs[0].loss_scale, 1e12 / 32);
  const WorkerEpochReport& a = fp32.epochs.back();
  const WorkerEpochReport& b = fp16.epochs.back();
  const double acc32 = static_cast<double>(a.test_correct) / a.test_n,
               acc16 = static_cast<double>(b.test_correct) / b.test_n;
  EXPECT_GT(acc16, 0.8) << "fp32 " << acc32;
  EXPECT_NEAR(acc16, acc32, 0.05);
}

}  // namespace
