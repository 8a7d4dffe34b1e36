// The worker's half of compression: which encoding each tensor uses, and the per-slice encoders of its pushes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/checkpoint/residual_file.h"
#include "common/compression/codec.h"
#include "common/compression/error_feedback.h"
#include "common/compression/settings.h"

namespace pshard::compression {

// One encoder (codec and error-feedback residual) per slice, made at its first push. Pushes of different slices
// may come from different threads at once; pushes of one slice are serialised (its residual orders them).
//
//   PushEncoder enc(settings, /*worker_rank=*/1, layout.slices().size());
//   if (enc.push_encoding(tensor_bytes) != Encoding::NONE) {
//     std::vector<uint8_t> bytes(enc.max_encoded_bytes(n));
//     bytes.resize(enc.encode(slice_id, step, grad, n, bytes.data()));
//   }
class PushEncoder {
 public:
  PushEncoder(const Settings& settings, uint32_t worker_rank, size_t num_slices);

  const Settings& settings() const { return settings_; }
  // The encoding of a push / of a pull's reply for a tensor of `tensor_bytes` bytes (none below min_bytes).
  Encoding push_encoding(uint64_t tensor_bytes) const;
  Encoding pull_encoding(uint64_t tensor_bytes) const;
  size_t max_encoded_bytes(size_t n) const { return probe_->max_encoded_bytes(n); }
  // Encodes the n gradient values of slice `slice_id` (with error feedback when the settings ask for it) into
  // `out`, which holds max_encoded_bytes(n) bytes; returns the bytes written. Thread-safe.
  size_t encode(uint32_t slice_id, int64_t step, const float* grad, size_t n, uint8_t* out);

  // Checkpoints of a sync job's residuals. keep_states_after(step): each lossy slice's state (residual and codec
  // state) after its encode of `step` is kept, and handed to `sink` once every encode of that step is done: at the
  // first encode of a later step (a sync worker pushes step + 1 only after every reply of step), or at flush().
  using StatesSink = std::function<void(int64_t step, std::vector<ResidualSlice> slices)>;
  void set_states_sink(StatesSink sink) { sink_ = std::move(sink); }
  void keep_states_after(int64_t step);
  // The states as they are now, as those after `step` (a worker whose encodes ended there: the job stopped at step + 1
  // on another worker's request), unless they were kept as that step's encodes came.
  void keep_current_states(int64_t step);
  void flush();
  // A checkpoint's states (a resumed run), before the first encode: an Error for a slice outside the layout.
  void restore(const std::vector<ResidualSlice>& slices);
  // Whether the encodes carry state from step to step: error feedback's residuals, or random-k's sampler.
  bool keeps_state() const {
    return probe_->drops_information() && (settings_.error_feedback || !probe_->save_state().empty());
  }

 private:
  struct SliceEncoder {
    std::mutex mu;
    std::unique_ptr<Codec> codec;
    ErrorFeedback feedback;
  };
  SliceEncoder& slice(uint32_t slice_id);  // made at its first use
  // The kept states of a step before `step`, to the sink (outside the lock); none: nothing.
  void hand_over_before(int64_t step);
  Settings settings_;
  uint32_t rank_;
  std::unique_ptr<Codec> probe_;  // sizes only
  std::mutex slices_mu;           // guards the creation of entries of slices_
  std::vector<std::unique_ptr<SliceEncoder>> slices_;
  StatesSink sink_;
  std::mutex states_mu_;  // guards kept_ and keep_step_'s changes
  std::atomic<int64_t> keep_step_{-1};
  std::vector<ResidualSlice> kept_;
};

}  // namespace pshard::compression
