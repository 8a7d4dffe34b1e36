// The worker's half of compression: which encoding each tensor uses, and the per-slice encoders of its pushes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

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
//     bytes.resize(enc.encode(slice_id, grad, n, bytes.data()));
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
  size_t encode(uint32_t slice_id, const float* grad, size_t n, uint8_t* out);

 private:
  struct SliceEncoder {
    std::mutex mu;
    std::unique_ptr<Codec> codec;
    ErrorFeedback feedback;
  };
  Settings settings_;
  uint32_t rank_;
  std::unique_ptr<Codec> probe_;  // sizes only
  std::mutex slices_mu;           // guards the creation of entries of slices_
  std::vector<std::unique_ptr<SliceEncoder>> slices_;
};

}  // namespace pshard::compression
