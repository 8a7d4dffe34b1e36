// Seeded per-epoch permutations and their per-rank shards.
#include "worker/data/sampler.h"

#include <random>
#include <string>

#include "common/error.h"
#include "worker/data/random.h"

namespace pshard::data {

ShardSampler::ShardSampler(int64_t num_samples, int rank, int world_size, uint64_t seed, bool shuffle)
    : num_samples_(num_samples), rank_(rank), world_size_(world_size), seed_(seed), shuffle_(shuffle) {
  if (num_samples < 0) throw Error("sampler: negative sample count " + std::to_string(num_samples));
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw Error("sampler: rank " + std::to_string(rank) + " is not in [0, " + std::to_string(world_size) + ")");
  }
}

ShardSampler::ShardSampler(int64_t num_samples, int rank, std::vector<int64_t> rank_batches, uint64_t seed,
                           bool shuffle)
    : ShardSampler(num_samples, rank, static_cast<int>(rank_batches.size()), seed, shuffle) {
  for (int64_t b : rank_batches) {
    if (b < 1) throw Error("sampler: batch size must be >= 1, got " + std::to_string(b));
  }
  rank_batches_ = std::move(rank_batches);
}

std::vector<int64_t> ShardSampler::permutation(int64_t epoch) const {
  std::vector<int64_t> perm(static_cast<size_t>(num_samples_));
  for (int64_t i = 0; i < num_samples_; ++i) perm[static_cast<size_t>(i)] = i;
  if (!shuffle_) return perm;
  std::mt19937_64 gen(mix_seed(seed_, static_cast<uint64_t>(epoch)));
  for (int64_t i = num_samples_ - 1; i > 0; --i) {
    auto j = static_cast<int64_t>(uniform_below(gen, static_cast<uint64_t>(i) + 1));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

int64_t ShardSampler::steps_per_epoch(int64_t batch_size) const {
  if (batch_size < 1) throw Error("sampler: batch size must be >= 1, got " + std::to_string(batch_size));
  if (!rank_batches_.empty()) {
    int64_t global = 0;
    for (int64_t b : rank_batches_) global += b;
    return num_samples_ / global;
  }
  return num_samples_ / (static_cast<int64_t>(world_size_) * batch_size);
}

std::vector<int64_t> ShardSampler::epoch_indices(int64_t epoch, int64_t batch_size) const {
  // Step t's global batch starts at t * global; this rank's part at offset within it.
  int64_t global = static_cast<int64_t>(world_size_) * batch_size, offset = rank_ * batch_size;
  if (!rank_batches_.empty()) {
    batch_size = rank_batches_[static_cast<size_t>(rank_)];
    global = 0;
    offset = 0;
    for (size_t r = 0; r < rank_batches_.size(); ++r) {
      if (static_cast<int>(r) < rank_) offset += rank_batches_[r];
      global += rank_batches_[r];
    }
  }
  const int64_t steps = steps_per_epoch(batch_size);
  std::vector<int64_t> perm = permutation(epoch);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(steps * batch_size));
  for (int64_t t = 0; t < steps; ++t) {
    auto begin = perm.begin() + t * global + offset;
    out.insert(out.end(), begin, begin + batch_size);
  }
  return out;
}

std::vector<int64_t> eval_shard(int64_t num_samples, int rank, int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw Error("eval_shard: rank " + std::to_string(rank) + " is not in [0, " + std::to_string(world_size) + ")");
  }
  std::vector<int64_t> out;
  for (int64_t i = rank; i < num_samples; i += world_size) out.push_back(i);
  return out;
}

}  // namespace pshard::data
