// BatchLoader: prefetched batches equal synchronous ones, epochs restart cleanly, destruction mid-epoch joins.
#include "worker/data/batch_loader.h"

#include <gtest/gtest.h>

#include <chrono>
#include <utility>

#include "tests/worker/data/temp_dir.h"
#include "worker/data/synthetic.h"

namespace pshard::data {
namespace {

// All batches of one epoch.
std::vector<Batch> run_epoch(BatchLoader& loader, int64_t epoch) {
  loader.start_epoch(epoch);
  std::vector<Batch> out;
  Batch b;
  while (loader.next(&b)) out.push_back(b);
  return out;
}

void expect_same(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].n, b[i].n) << i;
    EXPECT_EQ(a[i].step, b[i].step) << i;
    EXPECT_EQ(a[i].x, b[i].x) << i;
    EXPECT_EQ(a[i].labels, b[i].labels) << i;
    EXPECT_EQ(a[i].targets, b[i].targets) << i;
  }
}

TEST(BatchLoader, BatchesHoldTheSamplersSamples) {
  Dataset d = make_synthetic_images(103, 1, {2, 3, 3}, 5, 1).train;
  ShardSampler sampler(103, 1, 3, 77);
  BatchLoader loader(d, sampler, 4, 0);
  EXPECT_EQ(loader.steps_per_epoch(), 8);  // floor(103 / 12)
  std::vector<int64_t> idx = sampler.epoch_indices(2, 4);
  std::vector<Batch> batches = run_epoch(loader, 2);
  ASSERT_EQ(batches.size(), 8u);
  for (size_t t = 0; t < batches.size(); ++t) {
    ASSERT_EQ(batches[t].n, 4);
    ASSERT_EQ(batches[t].x.size(), 4u * 18u);
    for (int64_t k = 0; k < 4; ++k) {
      int64_t i = idx[t * 4 + static_cast<size_t>(k)];
      EXPECT_EQ(std::vector<float>(batches[t].x.begin() + k * 18, batches[t].x.begin() + (k + 1) * 18),
                std::vector<float>(d.sample(i), d.sample(i) + 18));
      EXPECT_EQ(batches[t].labels[static_cast<size_t>(k)], d.labels[static_cast<size_t>(i)]);
    }
  }
}

// take_steps (dynamic batch assignment): the claimed steps of the epoch, in order, whether the claim follows on from
// the last one (what was prefetched is kept) or jumps ahead (it is dropped), with and without a prefetch thread; a
// range outside the epoch is refused.
TEST(BatchLoader, TakeStepsYieldsTheClaimedStepsOfTheEpoch) {
  Dataset d = make_synthetic_images(200, 1, {2, 3, 3}, 5, 1).train;
  ShardSampler everyone(200, 0, 1, 9);
  for (int depth : {0, 1, 3}) {
    BatchLoader whole(d, everyone, 8, 0);
    const std::vector<Batch> all = run_epoch(whole, 1);  // 25 steps
    ASSERT_EQ(all.size(), 25u);
    BatchLoader loader(d, everyone, 8, depth);
    loader.start_epoch(1);
    std::vector<Batch> got;
    Batch b;
    for (auto [first, end] : {std::pair<int64_t, int64_t>{0, 3}, {3, 5}, {9, 12}, {20, 25}}) {
      loader.take_steps(first, end);
      while (loader.next(&b)) got.push_back(b);
    }
    const std::vector<int64_t> expected = {0, 1, 2, 3, 4, 9, 10, 11, 20, 21, 22, 23, 24};
    ASSERT_EQ(got.size(), expected.size()) << "depth " << depth;
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(got[i].step, expected[i]) << "depth " << depth;
      EXPECT_EQ(got[i].x, all[static_cast<size_t>(expected[i])].x) << "depth " << depth << " step " << expected[i];
      EXPECT_EQ(got[i].labels, all[static_cast<size_t>(expected[i])].labels);
    }
    EXPECT_THROW(loader.take_steps(24, 26), Error);
    EXPECT_THROW(loader.take_steps(5, 4), Error);
  }
}

TEST(BatchLoader, PrefetchEqualsSynchronous) {
  Dataset cls = make_synthetic_images(500, 1, {3, 4, 4}, 10, 2).train;
  Dataset reg = make_synthetic_regression(500, 1, 6, 0.1, 2).train;
  for (const Dataset* d : {&cls, &reg}) {
    ShardSampler sampler(500, 2, 4, 5);
    BatchLoader sync(*d, sampler, 16, 0);
    for (int depth : {1, 2, 8}) {
      BatchLoader pre(*d, sampler, 16, depth);
      for (int64_t epoch : {0, 1, 2}) {
        std::vector<Batch> a = run_epoch(sync, epoch), b = run_epoch(pre, epoch);
        ASSERT_EQ(a.size(), 7u);  // floor(500 / 64)
        expect_same(a, b);
      }
      // Epochs differ.
      EXPECT_NE(run_epoch(pre, 0)[0].x, run_epoch(pre, 1)[0].x);
    }
  }
}

TEST(BatchLoader, RestartMidEpochAndEvalMode) {
  Dataset d = make_synthetic_regression(300, 1, 3, 0.1, 4).train;
  ShardSampler sampler(300, 0, 2, 8);
  BatchLoader sync(d, sampler, 10, 0), pre(d, sampler, 10, 3);
  std::vector<Batch> want = run_epoch(sync, 6);
  pre.start_epoch(5);
  Batch b;
  ASSERT_TRUE(pre.next(&b));
  ASSERT_TRUE(pre.next(&b));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the prefetch thread fill its queue
  expect_same(want, run_epoch(pre, 6));                        // stale epoch-5 batches are dropped

  // Evaluation: fixed indices, last batch partial.
  std::vector<int64_t> shard = eval_shard(300, 1, 4);  // 75 indices
  BatchLoader eval_sync(d, shard, 16, 0), eval_pre(d, shard, 16, 2);
  EXPECT_EQ(eval_pre.steps_per_epoch(), 5);
  std::vector<Batch> e1 = run_epoch(eval_sync, 0), e2 = run_epoch(eval_pre, 3);
  expect_same(e1, e2);
  ASSERT_EQ(e1.size(), 5u);
  EXPECT_EQ(e1.back().n, 11);
  EXPECT_EQ(e1.back().targets.size(), 11u);
  EXPECT_FLOAT_EQ(e1.back().targets[10], d.targets[297]);  // rank 1 of 4 takes 1, 5, ..., 297
}

TEST(BatchLoader, DestroyedMidEpochStopsQuickly) {
  Dataset d = make_synthetic_images(2000, 1, {3, 16, 16}, 10, 3).train;
  ShardSampler sampler(2000, 0, 1, 1);
  for (int round = 0; round < 20; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    {
      BatchLoader loader(d, sampler, 32, 4);
      loader.start_epoch(round);
      Batch b;
      for (int i = 0; i < round % 5; ++i) ASSERT_TRUE(loader.next(&b));
    }  // destructor joins the prefetch thread while it is mid-epoch
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(ms, 1000) << "round " << round;
  }
  // Never started: the thread is idle and still joins.
  { BatchLoader idle(d, sampler, 32, 2); }
}

TEST(BatchLoader, Errors) {
  Dataset d = make_synthetic_images(20, 1, {1, 2, 2}, 2, 3).train;
  BatchLoader loader(d, ShardSampler(20, 0, 1, 1), 5, 1);
  Batch b;
  EXPECT_NE(testing::error_of([&] { loader.next(&b); }).find("before start_epoch"), std::string::npos);
  EXPECT_NE(testing::error_of([&] { BatchLoader x(d, ShardSampler(21, 0, 1, 1), 5, 1); }).find("covers 21 samples"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              BatchLoader x(d, std::vector<int64_t>{0, 20}, 5, 0);
            }).find("index 20"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { BatchLoader x(d, ShardSampler(20, 0, 1, 1), 0, 1); }).find("batch size"),
            std::string::npos);
}

}  // namespace
}  // namespace pshard::data
