// ShardSampler: per-epoch permutations, disjoint rank shards, and W workers x b == 1 worker x W*b.
#include "worker/data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "common/error.h"
#include "tests/worker/data/temp_dir.h"
#include "worker/data/random.h"

namespace pshard::data {
namespace {

TEST(ShardSampler, PermutationIsAPermutationAndDeterministic) {
  ShardSampler a(1000, 0, 1, 17), b(1000, 0, 1, 17);
  std::vector<int64_t> p = a.permutation(3);
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_EQ(p, b.permutation(3));                             // same (seed, epoch): same order
  EXPECT_NE(p, a.permutation(4));                             // next epoch: another order
  EXPECT_NE(p, ShardSampler(1000, 0, 1, 18).permutation(3));  // another seed
  int64_t fixed_points = 0;
  for (int64_t i = 0; i < 1000; ++i) fixed_points += p[static_cast<size_t>(i)] == i;
  EXPECT_LT(fixed_points, 10);  // a shuffle, not the identity (expected about 1)
  EXPECT_EQ(ShardSampler(5, 0, 1, 17, /*shuffle=*/false).permutation(3), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(ShardSampler, PinnedPermutation) {
  // The order depends only on mt19937_64 (fully specified by the standard) and
  // our Fisher-Yates, so it is the same with every compiler and library:
  // recompute it here independently.
  std::vector<int64_t> expect = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::mt19937_64 gen(mix_seed(5, 2));
  for (int64_t i = 9; i > 0; --i) {
    uint64_t bound = static_cast<uint64_t>(i) + 1, limit = UINT64_MAX - UINT64_MAX % bound, r;
    do {
      r = gen();
    } while (r >= limit);
    std::swap(expect[static_cast<size_t>(i)], expect[r % bound]);
  }
  EXPECT_EQ(ShardSampler(10, 0, 1, 5).permutation(2), expect);
}

TEST(ShardSampler, StepsAndDisjointShards) {
  const int64_t n = 1003, b = 10;
  const int w = 4;
  std::set<int64_t> seen;
  for (int r = 0; r < w; ++r) {
    ShardSampler s(n, r, w, 9);
    EXPECT_EQ(s.steps_per_epoch(b), 25);  // floor(1003 / 40), the same on every rank
    std::vector<int64_t> idx = s.epoch_indices(0, b);
    ASSERT_EQ(idx.size(), 250u);
    for (int64_t i : idx) {
      EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " on two ranks";
      EXPECT_GE(i, 0);
      EXPECT_LT(i, n);
    }
  }
  EXPECT_EQ(seen.size(), 1000u);  // 3 samples left over this epoch
}

TEST(ShardSampler, UnionOfRanksIsTheSingleWorkerBatch) {
  const int64_t n = 997, b = 8;
  for (int w : {2, 3, 4, 8}) {
    for (int64_t epoch : {0, 1, 5}) {
      ShardSampler single(n, 0, 1, 1234);
      std::vector<int64_t> big = single.epoch_indices(epoch, w * b);
      std::vector<std::vector<int64_t>> ranks;
      for (int r = 0; r < w; ++r) ranks.push_back(ShardSampler(n, r, w, 1234).epoch_indices(epoch, b));
      int64_t steps = single.steps_per_epoch(w * b);
      ASSERT_EQ(steps, ShardSampler(n, w - 1, w, 1234).steps_per_epoch(b));
      for (int64_t t = 0; t < steps; ++t) {
        std::vector<int64_t> joined;
        for (int r = 0; r < w; ++r) {
          joined.insert(joined.end(), ranks[static_cast<size_t>(r)].begin() + t * b,
                        ranks[static_cast<size_t>(r)].begin() + (t + 1) * b);
        }
        std::vector<int64_t> want(big.begin() + t * w * b, big.begin() + (t + 1) * w * b);
        ASSERT_EQ(joined, want) << "w=" << w << " epoch=" << epoch << " step=" << t;
      }
    }
  }
}

// train.worker_batch_sizes: ranks with batches 32 and 96 (and 5, 11, 16) take, in rank order, exactly the batch of one
// worker with their sum, step by step, and agree on the number of steps.
TEST(ShardSampler, UnevenRankBatchesMakeTheSingleWorkerBatchInRankOrder) {
  const int64_t n = 1000;
  for (const std::vector<int64_t>& batches : {std::vector<int64_t>{32, 96}, std::vector<int64_t>{5, 11, 16}}) {
    int64_t global = 0;
    for (int64_t b : batches) global += b;
    ShardSampler single(n, 0, 1, 99);
    const std::vector<int64_t> big = single.epoch_indices(3, global);
    const int64_t steps = single.steps_per_epoch(global);
    std::vector<std::vector<int64_t>> ranks;
    for (int r = 0; r < static_cast<int>(batches.size()); ++r) {
      ShardSampler s(n, r, batches, 99);
      ASSERT_EQ(s.steps_per_epoch(batches[static_cast<size_t>(r)]), steps);
      ranks.push_back(s.epoch_indices(3, batches[static_cast<size_t>(r)]));
      ASSERT_EQ(static_cast<int64_t>(ranks.back().size()), steps * batches[static_cast<size_t>(r)]);
    }
    for (int64_t t = 0; t < steps; ++t) {
      std::vector<int64_t> joined;
      for (size_t r = 0; r < batches.size(); ++r) {
        joined.insert(joined.end(), ranks[r].begin() + t * batches[r], ranks[r].begin() + (t + 1) * batches[r]);
      }
      ASSERT_EQ(joined, std::vector<int64_t>(big.begin() + t * global, big.begin() + (t + 1) * global)) << t;
    }
  }
  EXPECT_THROW(ShardSampler(100, 0, std::vector<int64_t>{8, 0}, 1), pshard::Error);
}

TEST(ShardSampler, EvalShardCoversEverySampleOnce) {
  std::vector<int> hits(103, 0);
  for (int r = 0; r < 4; ++r) {
    std::vector<int64_t> s = eval_shard(103, r, 4);
    EXPECT_EQ(s.size(), r < 3 ? 26u : 25u);
    for (int64_t i : s) {
      EXPECT_EQ(i % 4, r);
      hits[static_cast<size_t>(i)]++;
    }
  }
  EXPECT_EQ(hits, std::vector<int>(103, 1));
}

TEST(ShardSampler, BadArgumentsAreErrors) {
  EXPECT_NE(testing::error_of([] { ShardSampler(10, 4, 4, 1); }).find("rank 4 is not in [0, 4)"), std::string::npos);
  EXPECT_NE(testing::error_of([] { ShardSampler(10, 0, 1, 1).steps_per_epoch(0); }).find("batch size"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { eval_shard(10, -1, 2); }).find("rank -1"), std::string::npos);
}

}  // namespace
}  // namespace pshard::data
