// The job's learning-rate policy: read from the config once, and whose batches make a step's global batch in a fixed
// job and in either kind of elastic job.
#include "optim/lr_policy.h"

#include <gtest/gtest.h>

#include <string>

#include "common/config/config.h"
#include "common/error.h"

namespace {

using pshard::optim::GlobalBatch;
using pshard::optim::LrPolicy;

LrPolicy policy(const std::string& cluster) {
  return LrPolicy::from_config(pshard::Config::from_string(
      "[optimizer]\nlr = 0.05\n[train]\nbatch_size = 32\n[lr_schedule]\nscaling = \"linear\"\nreference_batch = 64\n"
      "[cluster]\n" +
          cluster,
      "job.toml"));
}

TEST(LrPolicy, AFixedJobsGlobalBatchIsEveryWorkersWhoeverPushed) {
  const LrPolicy p = policy("");
  EXPECT_FLOAT_EQ(p.base_lr, 0.05f);
  EXPECT_EQ(p.batch_size, 32);
  EXPECT_EQ(p.shape.scaling, "linear");
  EXPECT_EQ(p.global_batch, GlobalBatch::kAllWorkers);
  EXPECT_EQ(p.batch_workers(4, 3), 4u);
  // 0.05 x (4 x 32) / 64 = 0.1, the linear scaling rule's peak.
  EXPECT_FLOAT_EQ(p.schedule(p.batch_workers(4, 3), 100).lr_at(10), 0.1f);
}

TEST(LrPolicy, AnElasticJobFollowsItsMembersOrKeepsItsFewest) {
  const LrPolicy members = policy("min_workers = 2\n");
  EXPECT_EQ(members.global_batch, GlobalBatch::kStepWorkers);
  EXPECT_EQ(members.batch_workers(8, 3), 3u);
  EXPECT_EQ(members.batch_workers(8, 0), 1u);
  EXPECT_FLOAT_EQ(members.schedule(members.batch_workers(8, 3), 100).lr_at(0), 0.075f);

  const LrPolicy fewest = policy("min_workers = 2\nelastic_batch = \"global\"\n");
  EXPECT_EQ(fewest.global_batch, GlobalBatch::kFixedWorkers);
  EXPECT_EQ(fewest.fixed_workers, 2u);
  EXPECT_EQ(fewest.batch_workers(8, 5), 2u);
  EXPECT_FLOAT_EQ(fewest.schedule(fewest.batch_workers(8, 5), 100).lr_at(0), 0.05f);
}

TEST(LrPolicy, ACosineScheduleNeedsTheRunsLength) {
  LrPolicy p = policy("");
  p.shape.name = "cosine";
  EXPECT_THROW(p.schedule(2, 0), pshard::Error);
  EXPECT_FLOAT_EQ(p.schedule(2, 100).lr_at(0), 0.05f);  // 0.05 x 64 / 64 at the top of the cosine
}

}  // namespace
