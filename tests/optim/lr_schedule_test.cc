// Learning-rate schedules at chosen steps: warmup boundaries, step decay, cosine midpoint and end, linear scaling.
#include "optim/lr_schedule.h"

#include <gtest/gtest.h>

#include <string>

#include "common/config/config.h"
#include "common/error.h"

namespace {

using pshard::optim::LrSchedule;
using pshard::optim::LrScheduleParams;

LrScheduleParams shape(const std::string& name, int64_t warmup = 0) {
  LrScheduleParams p;
  p.name = name;
  p.warmup_steps = warmup;
  return p;
}

std::string error_of(float base_lr, const LrScheduleParams& p, int64_t global_batch, int64_t run_steps) {
  try {
    LrSchedule(base_lr, p, global_batch, run_steps);
  } catch (const pshard::Error& e) {
    return e.what();
  }
  return "";
}

TEST(LrSchedule, ConstantWithoutWarmup) {
  LrSchedule s(0.05f, shape("constant"), 64, 1000);
  EXPECT_FLOAT_EQ(s.lr_at(0), 0.05f);
  EXPECT_FLOAT_EQ(s.lr_at(123456), 0.05f);
  EXPECT_FLOAT_EQ(s.peak_lr(), 0.05f);
}

TEST(LrSchedule, LinearWarmupReachesPeakAtLastWarmupStep) {
  // peak 0.4, 4 warmup steps: 0.4 * (step+1)/4 = 0.1, 0.2, 0.3, 0.4, then 0.4.
  LrSchedule s(0.4f, shape("constant", 4), 64, 1000);
  EXPECT_FLOAT_EQ(s.lr_at(0), 0.1f);
  EXPECT_FLOAT_EQ(s.lr_at(1), 0.2f);
  EXPECT_FLOAT_EQ(s.lr_at(2), 0.3f);
  EXPECT_FLOAT_EQ(s.lr_at(3), 0.4f);
  EXPECT_FLOAT_EQ(s.lr_at(4), 0.4f);
  EXPECT_FLOAT_EQ(s.lr_at(999), 0.4f);
}

TEST(LrSchedule, StepDecayCountsFromTheEndOfWarmup) {
  // peak 1, warmup 2, step_size 3, gamma 0.5: steps 0,1 warm up (0.5, 1); s = step - 2;
  // steps 2..4 (s 0..2) -> 1; step 5 (s 3) -> 0.5; step 7 -> 0.5; step 8 (s 6) -> 0.25; step 32 (s 30) -> 0.5^10.
  LrScheduleParams p = shape("step", 2);
  p.step_size = 3;
  p.gamma = 0.5f;
  LrSchedule s(1.0f, p, 64, 1000);
  EXPECT_FLOAT_EQ(s.lr_at(0), 0.5f);
  EXPECT_FLOAT_EQ(s.lr_at(1), 1.0f);
  EXPECT_FLOAT_EQ(s.lr_at(2), 1.0f);
  EXPECT_FLOAT_EQ(s.lr_at(4), 1.0f);
  EXPECT_FLOAT_EQ(s.lr_at(5), 0.5f);
  EXPECT_FLOAT_EQ(s.lr_at(7), 0.5f);
  EXPECT_FLOAT_EQ(s.lr_at(8), 0.25f);
  EXPECT_FLOAT_EQ(s.lr_at(32), 0.0009765625f);
}

TEST(LrSchedule, CosineFromPeakToMinAfterWarmup) {
  // peak 1, min 0.1, warmup 10, total 110 -> decays over T = 100 steps starting at step 10.
  // step 35 (s 25): 0.1 + 0.9*(1 + cos(pi/4))/2 = 0.1 + 0.9*0.853553391 = 0.868198052
  // step 60 (s 50, midpoint): 0.1 + 0.9*0.5 = 0.55
  // step 85 (s 75): 0.1 + 0.9*(1 - 0.707106781)/2 = 0.1 + 0.9*0.146446609 = 0.231801948
  // step 110 and after: 0.1
  LrScheduleParams p = shape("cosine", 10);
  p.total_steps = 110;
  p.min_lr = 0.1f;
  LrSchedule s(1.0f, p, 64, 5000);
  EXPECT_FLOAT_EQ(s.lr_at(0), 0.1f);
  EXPECT_FLOAT_EQ(s.lr_at(9), 1.0f);
  EXPECT_FLOAT_EQ(s.lr_at(10), 1.0f);
  EXPECT_NEAR(s.lr_at(35), 0.868198052f, 1e-6f);
  EXPECT_NEAR(s.lr_at(60), 0.55f, 1e-6f);
  EXPECT_NEAR(s.lr_at(85), 0.231801948f, 1e-6f);
  EXPECT_FLOAT_EQ(s.lr_at(110), 0.1f);
  EXPECT_FLOAT_EQ(s.lr_at(4999), 0.1f);
}

TEST(LrSchedule, CosineOverTheWholeRunWhenTotalStepsIsZero) {
  // total_steps 0 -> the run's 100 steps; peak 0.2, min 0: step 50 -> 0.1, step 25 -> 0.2*0.853553391 = 0.170710678,
  // step 100 -> 0.
  LrSchedule s(0.2f, shape("cosine"), 64, 100);
  EXPECT_FLOAT_EQ(s.lr_at(0), 0.2f);
  EXPECT_NEAR(s.lr_at(25), 0.170710678f, 1e-7f);
  EXPECT_NEAR(s.lr_at(50), 0.1f, 1e-7f);
  EXPECT_FLOAT_EQ(s.lr_at(100), 0.0f);
}

TEST(LrSchedule, LinearScalingRule) {
  // base 0.1 tuned for batch 256; 4 workers x 256 = 1024 -> peak 0.1 * 1024/256 = 0.4; warmup 5: step 0 -> 0.08.
  LrScheduleParams p = shape("constant", 5);
  p.scaling = "linear";
  p.reference_batch = 256;
  LrSchedule s(0.1f, p, 1024, 1000);
  EXPECT_FLOAT_EQ(s.peak_lr(), 0.4f);
  EXPECT_FLOAT_EQ(s.lr_at(0), 0.08f);
  EXPECT_FLOAT_EQ(s.lr_at(4), 0.4f);
  EXPECT_FLOAT_EQ(s.lr_at(5), 0.4f);
  // A smaller global batch scales down: 64/256 -> 0.025.
  EXPECT_FLOAT_EQ(LrSchedule(0.1f, p, 64, 1000).peak_lr(), 0.025f);
  // scaling none ignores the batch.
  p.scaling = "none";
  EXPECT_FLOAT_EQ(LrSchedule(0.1f, p, 1024, 1000).peak_lr(), 0.1f);
}

TEST(LrSchedule, BadParametersAreErrorsNamingWhat) {
  EXPECT_NE(error_of(0.1f, shape("linear_decay"), 64, 100).find("'linear_decay'"), std::string::npos);
  LrScheduleParams p = shape("constant");
  p.scaling = "sqrt";
  EXPECT_NE(error_of(0.1f, p, 64, 100).find("'sqrt'"), std::string::npos);
  // Cosine horizon not after warmup.
  EXPECT_NE(error_of(0.1f, shape("cosine", 100), 64, 100).find("lr_schedule.warmup_steps"), std::string::npos);
  EXPECT_NE(error_of(0.1f, shape("cosine"), 64, 0).find("lr_schedule.total_steps"), std::string::npos);
  // Linear scaling without a global batch.
  p.scaling = "linear";
  EXPECT_NE(error_of(0.1f, p, 0, 100).find("global batch"), std::string::npos);
  // Negative step.
  LrSchedule s(0.1f, shape("constant"), 64, 100);
  EXPECT_THROW(s.lr_at(-1), pshard::Error);
}

TEST(LrSchedule, ParamsFromConfig) {
  pshard::Config cfg = pshard::Config::from_string(
      "[lr_schedule]\nname = \"cosine\"\nwarmup_steps = 5\nstep_size = 7\ntotal_steps = 300\ngamma = 0.2\n"
      "min_lr = 0.001\nscaling = \"linear\"\nreference_batch = 128\n",
      "sched.toml");
  LrScheduleParams p = LrScheduleParams::from_config(cfg);
  EXPECT_EQ(p.name, "cosine");
  EXPECT_EQ(p.warmup_steps, 5);
  EXPECT_EQ(p.step_size, 7);
  EXPECT_EQ(p.total_steps, 300);
  EXPECT_FLOAT_EQ(p.gamma, 0.2f);
  EXPECT_FLOAT_EQ(p.min_lr, 0.001f);
  EXPECT_EQ(p.scaling, "linear");
  EXPECT_EQ(p.reference_batch, 128);
  // 0.05 * 512/128 = 0.2 peak; warmup step 0 -> 0.04.
  LrSchedule s(0.05f, p, 512, 1000);
  EXPECT_FLOAT_EQ(s.peak_lr(), 0.2f);
  EXPECT_FLOAT_EQ(s.lr_at(0), 0.04f);
}

}  // namespace
