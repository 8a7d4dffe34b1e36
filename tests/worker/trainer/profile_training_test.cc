// The trainer on a profile model: each step waits for a layer's weights right before that layer's forward sleep and
// hands each layer's gradients over right after its backward sleep, in reverse layer order, as for a real model.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "models/model.h"
#include "worker/trainer/parameter_sync.h"
#include "worker/trainer/run_setup.h"
#include "worker/trainer/trainer.h"

namespace {

using namespace pshard;
using Clock = std::chrono::steady_clock;

// The tests' three-layer profile: batch 32; forward 10, 15, 20 ms; backward 20, 30, 40 ms; two tensors per layer.
const std::string kThreeLayers = std::string(PSHARD_TEST_PROFILES) + "/three_layers.json";

// Records every call of the trainer with its time; keeps the weights as they are.
class RecordingSync : public trainer::ParameterSync {
 public:
  enum class Kind { kBeginStep, kWaitLayer, kGradsReady, kEndStep };
  struct Call {
    Kind kind;
    int64_t a = 0, b = 0;  // step | layer | (first, count)
    Clock::time_point at;
  };
  std::vector<Call> calls;

  void start(models::Model&) override {}
  void begin_step(int64_t step) override { record(Kind::kBeginStep, step); }
  void wait_layer(int layer) override { record(Kind::kWaitLayer, layer); }
  void grads_ready(int first, int count) override { record(Kind::kGradsReady, first, count); }
  void end_step(int64_t step) override { record(Kind::kEndStep, step); }
  void skip_step(int64_t) override {}
  void sync_all() override {}
  double lr_at(int64_t) const override { return 0.0; }
  trainer::SyncStats stats() const override { return {}; }

 private:
  void record(Kind kind, int64_t a, int64_t b = 0) { calls.push_back({kind, a, b, Clock::now()}); }
};

double ms_between(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

TEST(ProfileTraining, EachLayerWaitsBeforeItsForwardAndPushesAfterItsBackward) {
  // Batch 16 at the profile's 32: every time is halved.
  const Config cfg = Config::from_string(
      "[data]\nname = \"synthetic-images\"\nimage_shape = [1, 1, 1]\nclasses = 10\ntrain_size = 48\ntest_size = 16\n"
      "[model]\nname = \"profile\"\nprofile = \"" +
          kThreeLayers +
          "\"\n"
          "[train]\nepochs = 1\nbatch_size = 16\nthreads = 1\neval = false\n",
      "profile.toml");
  trainer::TrainingSetup setup = trainer::make_training_setup(cfg);
  RecordingSync sync;
  trainer::Trainer t(trainer::TrainerOptions::from_config(cfg, 0, 1), *setup.model, setup.data, sync);
  ASSERT_EQ(t.total_steps(), 3);
  t.run({}, {});

  using K = RecordingSync::Kind;
  // Per step: begin, wait 0, 1, 2, gradients of layer 2 (tensors 4, 5), 1 (2, 3), 0 (0, 1), end.
  const std::vector<std::pair<K, std::pair<int64_t, int64_t>>> one_step = {
      {K::kBeginStep, {0, 0}},  {K::kWaitLayer, {0, 0}},  {K::kWaitLayer, {1, 0}},  {K::kWaitLayer, {2, 0}},
      {K::kGradsReady, {4, 2}}, {K::kGradsReady, {2, 2}}, {K::kGradsReady, {0, 2}}, {K::kEndStep, {0, 0}}};
  ASSERT_EQ(sync.calls.size(), 3 * one_step.size());
  const double forward_ms[3] = {5, 7.5, 10}, backward_ms[3] = {10, 15, 20};
  const double slack_ms = 50;  // a sleep ends late by the scheduler's wake-up delay: generous on a loaded machine
  for (int64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const RecordingSync::Call* c = &sync.calls[static_cast<size_t>(step) * one_step.size()];
    for (size_t i = 0; i < one_step.size(); ++i) {
      SCOPED_TRACE("call " + std::to_string(i));
      EXPECT_EQ(c[i].kind, one_step[i].first);
      const bool steps = c[i].kind == K::kBeginStep || c[i].kind == K::kEndStep;
      EXPECT_EQ(c[i].a, steps ? step : one_step[i].second.first);
      EXPECT_EQ(c[i].b, one_step[i].second.second);
    }
    // Measured from the wait for layer 0: the wait for layer l comes after the forward sleeps of layers 0 .. l - 1,
    // and layer l's gradients after all forward sleeps and the backward sleeps of layers 2 .. l (the sleeps are
    // paced, ProfilePace: from the first layer's forward on, at least the sum of the times has passed).
    const Clock::time_point t0 = c[1].at;
    double expected = 0;
    for (int l = 1; l < 3; ++l) {
      expected += forward_ms[l - 1];
      const double at = ms_between(t0, c[1 + l].at);
      EXPECT_GE(at, expected) << "wait for layer " << l;
      EXPECT_LT(at, expected + slack_ms) << "wait for layer " << l;
    }
    expected += forward_ms[2];
    for (int l = 2; l >= 0; --l) {
      expected += backward_ms[l];
      const double at = ms_between(t0, c[4 + (2 - l)].at);
      EXPECT_GE(at, expected) << "gradients of layer " << l;
      EXPECT_LT(at, expected + slack_ms) << "gradients of layer " << l;
    }
    // The first wait is not preceded by any compute of its step.
    EXPECT_LT(ms_between(c[0].at, c[1].at), slack_ms);
  }
}

}  // namespace
