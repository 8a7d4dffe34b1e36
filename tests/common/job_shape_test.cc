// A job's shape read once from its config, and the rules about keys that are only wrong together.
#include "common/config/job_shape.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/error.h"

namespace {

using pshard::Config;
using pshard::JobMode;
using pshard::JobShape;

JobShape shape_of(const std::vector<std::string>& sets) {
  return JobShape::from_config(Config::from_string("", "t.toml", sets));
}

std::string error_of(const std::vector<std::string>& sets) {
  try {
    Config::from_string("", "t.toml", sets);
  } catch (const pshard::Error& e) {
    return e.what();
  }
  return "";
}

TEST(JobShape, ReadsTheDefaultsAsAFixedSyncJobThatAbortsOnADeadWorker) {
  const JobShape s = shape_of({});
  EXPECT_EQ(s.mode, JobMode::kSync);
  EXPECT_STREQ(s.mode_name(), "sync");
  EXPECT_TRUE(s.sync());
  EXPECT_FALSE(s.elastic());
  EXPECT_FALSE(s.may_lose_workers());
  EXPECT_FALSE(s.restart_workers);
  EXPECT_FALSE(s.restart_servers);
  EXPECT_FALSE(s.checkpoint_on_sigterm);
  EXPECT_FALSE(s.cuda());
  EXPECT_EQ(s.transport, "auto");
  EXPECT_EQ(s.precision, "fp32");
  EXPECT_EQ(s.loss_scaling, "none");  // auto resolved: none for fp32
  EXPECT_TRUE(s.aggregates_per_host());
}

TEST(JobShape, ReadsEachKeyOfTheShape) {
  const JobShape ssp = shape_of({"cluster.mode=ssp", "cluster.failure_policy=continue", "cluster.transport=tcp",
                                 "train.device=cuda", "cluster.server_failure_policy=restart"});
  EXPECT_EQ(ssp.mode, JobMode::kSsp);
  EXPECT_STREQ(ssp.mode_name(), "ssp");
  EXPECT_TRUE(ssp.continue_without_dead_workers);
  EXPECT_TRUE(ssp.may_lose_workers());
  EXPECT_TRUE(ssp.restart_servers);
  EXPECT_TRUE(ssp.cuda());
  EXPECT_EQ(ssp.transport, "tcp");
  EXPECT_STREQ(shape_of({"cluster.mode=async"}).mode_name(), "async");
  // An elastic job may lose workers whatever its failure policy says: they leave between epochs.
  const JobShape elastic = shape_of({"cluster.min_workers=2", "cluster.elastic_batch=global"});
  EXPECT_TRUE(elastic.elastic());
  EXPECT_EQ(elastic.min_workers, 2u);
  EXPECT_TRUE(elastic.elastic_global_batch);
  EXPECT_FALSE(elastic.continue_without_dead_workers);
  EXPECT_TRUE(elastic.may_lose_workers());
  // fp16 resolves train.loss_scaling = auto to dynamic, bf16 its pushes to bf16.
  EXPECT_EQ(shape_of({"train.precision=fp16"}).loss_scaling, "dynamic");
  EXPECT_EQ(shape_of({"train.precision=bf16"}).compression, "bf16");
}

TEST(JobShape, HostAggregationOnlyWhereTheJobHasWhatItNeeds) {
  EXPECT_FALSE(shape_of({"cluster.host_aggregation=off"}).aggregates_per_host());
  EXPECT_TRUE(shape_of({"cluster.host_aggregation=always"}).aggregates_per_host());
  const JobShape async = shape_of({"cluster.mode=async"});
  EXPECT_EQ(async.host_aggregation_needs(), std::vector<std::string>{"cluster.mode = sync"});
  EXPECT_FALSE(async.aggregates_per_host());
}

// pshard launch's own rule, once in the launcher, is now a rule of the config: every entry point refuses it.
TEST(JobShape, RestartedWorkersNeedAContinuingSyncJob) {
  EXPECT_NE(error_of({"cluster.restart_workers=true"})
                .find("key 'cluster.restart_workers': true needs cluster.failure_policy = continue and cluster.mode = "
                      "sync"),
            std::string::npos);
  EXPECT_NE(error_of({"cluster.restart_workers=true", "cluster.failure_policy=continue", "cluster.mode=async"})
                .find("key 'cluster.restart_workers'"),
            std::string::npos);
  EXPECT_EQ(error_of({"cluster.restart_workers=true", "cluster.failure_policy=continue"}), "");
}

// Dynamic batch assignment lets each worker train as many steps as it claims: async jobs only.
TEST(JobShape, DynamicBatchAssignmentNeedsAnAsyncJob) {
  EXPECT_FALSE(shape_of({}).dynamic_batches);
  EXPECT_TRUE(shape_of({"cluster.mode=async", "cluster.batch_assignment=dynamic"}).dynamic_batches);
  EXPECT_NE(error_of({"cluster.batch_assignment=dynamic"})
                .find("key 'cluster.batch_assignment': dynamic needs cluster.mode = async, not sync"),
            std::string::npos);
  EXPECT_NE(error_of({"cluster.batch_assignment=dynamic", "cluster.mode=ssp"})
                .find("dynamic needs cluster.mode = async, not ssp: SSP holds a worker"),
            std::string::npos);
  EXPECT_NE(error_of({"cluster.batch_assignment=shuffled"}).find("cluster.batch_assignment"), std::string::npos);
}

// Per-worker batches weigh a sync step's mean with the weights of every worker: refused where pushes are applied
// alone or a worker may be missing from a step.
TEST(JobShape, UnevenBatchesNeedAFixedSyncJob) {
  EXPECT_EQ(shape_of({"train.worker_batch_sizes=[32, 96]"}).worker_batches, (std::vector<int64_t>{32, 96}));
  EXPECT_FALSE(shape_of({}).uneven_batches());
  EXPECT_NE(error_of({"train.worker_batch_sizes=[32,96]", "cluster.mode=ssp"})
                .find("key 'train.worker_batch_sizes': per-worker batches need cluster.mode = sync, not ssp"),
            std::string::npos);
  EXPECT_NE(error_of({"train.worker_batch_sizes=[32,96]", "cluster.failure_policy=continue"})
                .find("per-worker batches need cluster.failure_policy = abort"),
            std::string::npos);
  EXPECT_NE(error_of({"train.worker_batch_sizes=[32,96]", "cluster.min_workers=2"})
                .find("per-worker batches need a fixed number of workers"),
            std::string::npos);
  EXPECT_NE(error_of({"train.worker_batch_sizes=[32,0]"}).find("key 'train.worker_batch_sizes'"), std::string::npos);
}

// The servers' own rules, now checked with the config: an async or SSP job has no step boundaries to checkpoint at.
TEST(JobShape, CheckpointsNeedASyncJob) {
  EXPECT_NE(error_of({"cluster.mode=async", "checkpoint.every_steps=10"})
                .find("key 'checkpoint.every_steps': a periodic checkpoint needs cluster.mode = sync, not async"),
            std::string::npos);
  EXPECT_NE(error_of({"cluster.mode=ssp", "checkpoint.every_seconds=30"})
                .find("key 'checkpoint.every_seconds': a periodic checkpoint needs cluster.mode = sync, not ssp"),
            std::string::npos);
  EXPECT_NE(error_of({"cluster.mode=async", "checkpoint.on_sigterm=checkpoint"})
                .find("key 'checkpoint.on_sigterm': checkpoint needs cluster.mode = sync, not async"),
            std::string::npos);
  EXPECT_EQ(error_of({"checkpoint.every_steps=10", "checkpoint.on_sigterm=checkpoint"}), "");
}

}  // namespace
