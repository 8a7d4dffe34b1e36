// Deterministic per-epoch shuffling and sharding across workers (DistributedSampler semantics).
#pragma once

#include <cstdint>
#include <vector>

namespace pshard::data {

// Which samples worker `rank` of `world_size` uses at each step.
//
// Epoch e uses one permutation of [0, N), the same on every worker, seeded
// from (seed, e) with std::mt19937_64 and a Fisher-Yates shuffle written here
// (portable, unlike std::shuffle). With per-worker batch b:
//   steps_per_epoch = floor(N / (W * b))          (equal on every worker)
//   rank r at step t takes perm[(t*W + r)*b, (t*W + r + 1)*b)
// so the W batches of step t, concatenated in rank order, are exactly the
// batch t of one worker with batch W*b. The N mod (W*b) samples left over
// change with the permutation every epoch. With a batch per rank (b_r,
// train.worker_batch_sizes; B = their sum) the same holds with rank r's
// batch at perm[t*B + b_0 + ... + b_(r-1), ... + b_r): steps_per_epoch =
// floor(N / B).
//
//   ShardSampler s(train.size(), rank, workers, cfg.get_int("run.seed"));
//   std::vector<int64_t> idx = s.epoch_indices(epoch, 64);  // steps_per_epoch(64) * 64 indices
//   // step t uses idx[t*64 .. t*64+64)
class ShardSampler {
 public:
  // shuffle = false: the permutation is the identity every epoch.
  ShardSampler(int64_t num_samples, int rank, int world_size, uint64_t seed, bool shuffle = true);
  // A batch per rank (`rank_batches`, one entry a rank): epoch_indices() then takes rank_batches[rank].
  ShardSampler(int64_t num_samples, int rank, std::vector<int64_t> rank_batches, uint64_t seed, bool shuffle = true);

  // The permutation of [0, N) shared by all ranks in epoch `epoch`.
  std::vector<int64_t> permutation(int64_t epoch) const;
  int64_t steps_per_epoch(int64_t batch_size) const;
  // This rank's samples of the epoch in step order: steps_per_epoch(b) * b indices.
  std::vector<int64_t> epoch_indices(int64_t epoch, int64_t batch_size) const;

  int64_t num_samples() const { return num_samples_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 private:
  int64_t num_samples_;
  int rank_, world_size_;
  uint64_t seed_;
  bool shuffle_;
  std::vector<int64_t> rank_batches_;  // empty: every rank's batch is the one asked for
};

// Evaluation shard: the indices i in [0, N) with i % world_size == rank, in
// increasing order. Every sample is evaluated by exactly one rank.
std::vector<int64_t> eval_shard(int64_t num_samples, int rank, int world_size);

// A uniform integer in [0, bound) from a 64-bit generator output stream,
// by rejection (no modulo bias); the same on every platform.
template <typename Gen>
uint64_t uniform_below(Gen& gen, uint64_t bound) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % bound;  // accept [0, limit)
  uint64_t r;
  do {
    r = gen();
  } while (r >= limit);
  return r % bound;
}

}  // namespace pshard::data
