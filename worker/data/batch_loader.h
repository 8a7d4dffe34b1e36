// Batches of a worker's shard, assembled ahead of time by a prefetch thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "worker/data/dataset.h"
#include "worker/data/sampler.h"

namespace pshard::data {

// One batch, copied out of a Dataset: x is n * sample_elems floats (NCHW for
// images), labels n entries (classification), targets n * target_dim (regression),
// ids n * id_fields categorical ids (click data).
struct Batch {
  int64_t n = 0;
  int64_t step = -1;  // step within the epoch
  std::vector<float> x;
  std::vector<int32_t> labels;
  std::vector<float> targets;
  std::vector<uint64_t> ids;
};

// Yields this rank's batches of an epoch in step order. With prefetch_depth
// > 0 a thread owned by the loader assembles up to prefetch_depth batches
// ahead (bounded queue); 0 assembles each batch inside next(). Buffers are
// recycled: next() swaps the ready batch into *out and keeps the vectors
// *out held before for a later batch, so a steady loop allocates nothing.
// `data` must outlive the loader. The destructor stops and joins the thread,
// also in the middle of an epoch.
//
//   BatchLoader loader(splits.train, ShardSampler(n, rank, W, seed), 64, /*prefetch_depth=*/2);
//   Batch batch;
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     loader.start_epoch(epoch);
//     while (loader.next(&batch)) train_step(batch.x, batch.labels, batch.n);
//   }
class BatchLoader {
 public:
  // Training: the sampler's shard, steps_per_epoch() full batches per epoch.
  BatchLoader(const Dataset& data, const ShardSampler& sampler, int64_t batch_size, int prefetch_depth);
  // Evaluation: `indices` (e.g. eval_shard(...)) in order, the same every
  // epoch; the last batch holds the remainder (n < batch_size).
  BatchLoader(const Dataset& data, std::vector<int64_t> indices, int64_t batch_size, int prefetch_depth);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Starts (or restarts, dropping what was prefetched) epoch `epoch`.
  void start_epoch(int64_t epoch);
  // From now on yields the epoch's steps [first, end) and then ends the epoch (cluster.batch_assignment = dynamic:
  // the batches this worker claimed). A batch prefetched for another step is dropped, unless `first` is the step
  // next() would have returned anyway. After start_epoch; an Error when the range is not within the epoch.
  void take_steps(int64_t first, int64_t end);
  // Fills *out with the next batch; false when the epoch is over. An Error
  // when start_epoch was not called or the prefetch thread failed.
  bool next(Batch* out);
  int64_t steps_per_epoch() const { return steps_; }
  int64_t batch_size() const { return batch_size_; }

 private:
  void check_args(int prefetch_depth) const;
  // Samples of a Dataset with a source are made for `epoch` (its augmentation draws).
  void assemble(const std::vector<int64_t>& indices, int64_t epoch, int64_t step, Batch* out) const;
  void producer_loop();

  const Dataset& data_;
  ShardSampler sampler_;
  bool eval_mode_;
  std::vector<int64_t> eval_indices_;
  int64_t batch_size_;
  int depth_;
  int64_t steps_ = 0;

  std::mutex mu_;
  std::condition_variable producer_cv_, consumer_cv_;
  std::shared_ptr<const std::vector<int64_t>> indices_;  // this epoch's samples in step order
  int64_t epoch_ = 0;
  bool started_ = false, stop_ = false;
  uint64_t generation_ = 0;  // bumped by start_epoch; stale batches are dropped
  int64_t produce_step_ = 0, consume_step_ = 0;
  int64_t end_step_ = 0;  // the epoch ends before this step: steps_, or take_steps()'s end
  std::deque<std::unique_ptr<Batch>> ready_;
  std::vector<std::unique_ptr<Batch>> free_;
  std::exception_ptr error_;
  std::thread producer_;
};

}  // namespace pshard::data
