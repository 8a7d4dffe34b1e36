// BatchLoader: synchronous or prefetching batch assembly with recycled buffers.
#include "worker/data/batch_loader.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "common/error.h"
#include "common/util/signals.h"

namespace pshard::data {
namespace {

// How long next() waits for the prefetch thread. Assembling one batch takes
// milliseconds, so running past this means the thread is stuck.
constexpr std::chrono::seconds kBatchTimeout{120};
// The prefetch thread re-checks its state at least this often.
constexpr std::chrono::milliseconds kProducerPoll{200};

}  // namespace

BatchLoader::BatchLoader(const Dataset& data, const ShardSampler& sampler, int64_t batch_size, int prefetch_depth)
    : data_(data), sampler_(sampler), eval_mode_(false), batch_size_(batch_size), depth_(prefetch_depth) {
  check_args(prefetch_depth);
  if (sampler.num_samples() != data.size()) {
    throw Error("batch loader: the sampler covers " + std::to_string(sampler.num_samples()) +
                " samples but data set '" + data.name + "' has " + std::to_string(data.size()));
  }
  steps_ = sampler_.steps_per_epoch(batch_size);
  if (depth_ > 0) producer_ = start_thread([this] { producer_loop(); });
}

BatchLoader::BatchLoader(const Dataset& data, std::vector<int64_t> indices, int64_t batch_size, int prefetch_depth)
    : data_(data),
      sampler_(0, 0, 1, 0, false),
      eval_mode_(true),
      eval_indices_(std::move(indices)),
      batch_size_(batch_size),
      depth_(prefetch_depth) {
  check_args(prefetch_depth);
  for (int64_t i : eval_indices_) {
    if (i < 0 || i >= data.size()) {
      throw Error("batch loader: index " + std::to_string(i) + " is outside data set '" + data.name + "' of " +
                  std::to_string(data.size()) + " samples");
    }
  }
  steps_ = (static_cast<int64_t>(eval_indices_.size()) + batch_size - 1) / batch_size;
  if (depth_ > 0) producer_ = start_thread([this] { producer_loop(); });
}

void BatchLoader::check_args(int prefetch_depth) const {
  if (batch_size_ < 1) throw Error("batch loader: batch size must be >= 1, got " + std::to_string(batch_size_));
  if (prefetch_depth < 0) {
    throw Error("batch loader: prefetch depth must be >= 0, got " + std::to_string(prefetch_depth));
  }
  data_.check_consistent("batch loader");
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  producer_cv_.notify_all();
  if (producer_.joinable()) producer_.join();
}

void BatchLoader::start_epoch(int64_t epoch) {
  auto indices = std::make_shared<const std::vector<int64_t>>(eval_mode_ ? eval_indices_
                                                                         : sampler_.epoch_indices(epoch, batch_size_));
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++generation_;
    indices_ = std::move(indices);
    epoch_ = epoch;
    produce_step_ = 0;
    consume_step_ = 0;
    end_step_ = steps_;
    started_ = true;
    error_ = nullptr;
    while (!ready_.empty()) {
      free_.push_back(std::move(ready_.front()));
      ready_.pop_front();
    }
  }
  producer_cv_.notify_all();
}

void BatchLoader::take_steps(int64_t first, int64_t end) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!started_) throw Error("batch loader: take_steps() before start_epoch()");
    if (first < 0 || end < first || end > steps_) {
      throw Error("batch loader: steps [" + std::to_string(first) + ", " + std::to_string(end) +
                  ") are not within the epoch's " + std::to_string(steps_));
    }
    if (first != consume_step_) {  // what was prefetched is for other steps
      ++generation_;
      produce_step_ = consume_step_ = first;
      while (!ready_.empty()) {
        free_.push_back(std::move(ready_.front()));
        ready_.pop_front();
      }
    }
    end_step_ = end;
  }
  producer_cv_.notify_all();
}

bool BatchLoader::next(Batch* out) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!started_) throw Error("batch loader: next() before start_epoch()");
  if (consume_step_ >= end_step_) return false;
  if (depth_ == 0) {
    int64_t step = consume_step_++;
    std::shared_ptr<const std::vector<int64_t>> indices = indices_;
    int64_t epoch = epoch_;
    lk.unlock();
    assemble(*indices, epoch, step, out);
    return true;
  }
  auto deadline = std::chrono::steady_clock::now() + kBatchTimeout;
  while (ready_.empty() && !error_) {
    if (consumer_cv_.wait_until(lk, deadline) == std::cv_status::timeout && ready_.empty() && !error_) {
      throw Error("batch loader: no batch from the prefetch thread after " + std::to_string(kBatchTimeout.count()) +
                  " s (step " + std::to_string(consume_step_) + ")");
    }
  }
  if (error_) std::rethrow_exception(error_);
  std::unique_ptr<Batch> ready = std::move(ready_.front());
  ready_.pop_front();
  ++consume_step_;
  std::swap(*out, *ready);            // the caller's old buffers ...
  free_.push_back(std::move(ready));  // ... are reused for a later batch
  lk.unlock();
  producer_cv_.notify_all();
  return true;
}

void BatchLoader::assemble(const std::vector<int64_t>& indices, int64_t epoch, int64_t step, Batch* out) const {
  int64_t begin = step * batch_size_;
  int64_t n = std::min<int64_t>(batch_size_, static_cast<int64_t>(indices.size()) - begin);
  int64_t elems = data_.sample_elems();
  out->n = n;
  out->step = step;
  out->x.resize(static_cast<size_t>(n * elems));
  if (data_.source) {
    data_.source->fill(indices.data() + begin, n, epoch, out->x.data());
  }
  for (int64_t k = 0; k < n && !data_.source; ++k) {
    std::memcpy(out->x.data() + k * elems, data_.sample(indices[static_cast<size_t>(begin + k)]),
                sizeof(float) * static_cast<size_t>(elems));
  }
  out->labels.resize(data_.num_classes > 0 ? static_cast<size_t>(n) : 0);
  for (size_t k = 0; k < out->labels.size(); ++k) {
    out->labels[k] = data_.labels[static_cast<size_t>(indices[begin + static_cast<int64_t>(k)])];
  }
  const int64_t fields = data_.id_fields;
  out->ids.resize(static_cast<size_t>(n * fields));
  for (int64_t k = 0; k < n && fields > 0; ++k) {
    std::memcpy(out->ids.data() + k * fields, data_.id_row(indices[static_cast<size_t>(begin + k)]),
                sizeof(uint64_t) * static_cast<size_t>(fields));
  }
  int64_t td = data_.target_dim;
  out->targets.resize(static_cast<size_t>(n * td));
  for (int64_t k = 0; k < n && td > 0; ++k) {
    std::memcpy(out->targets.data() + k * td, data_.targets.data() + indices[static_cast<size_t>(begin + k)] * td,
                sizeof(float) * static_cast<size_t>(td));
  }
}

void BatchLoader::producer_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    bool work = started_ && !error_ && produce_step_ < end_step_ && static_cast<int>(ready_.size()) < depth_;
    if (!work) {
      producer_cv_.wait_for(lk, kProducerPoll);
      continue;
    }
    uint64_t generation = generation_;
    int64_t step = produce_step_++;
    std::shared_ptr<const std::vector<int64_t>> indices = indices_;
    int64_t epoch = epoch_;
    std::unique_ptr<Batch> batch;
    if (!free_.empty()) {
      batch = std::move(free_.back());
      free_.pop_back();
    }
    lk.unlock();
    std::exception_ptr failed;
    try {
      if (!batch) batch = std::make_unique<Batch>();
      assemble(*indices, epoch, step, batch.get());
    } catch (...) {
      failed = std::current_exception();
    }
    lk.lock();
    if (generation != generation_) {  // start_epoch() ran meanwhile: this batch is stale
      if (batch) free_.push_back(std::move(batch));
      continue;
    }
    if (failed) {
      error_ = failed;
    } else {
      ready_.push_back(std::move(batch));
    }
    consumer_cv_.notify_all();
  }
}

}  // namespace pshard::data
