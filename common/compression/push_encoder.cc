// PushEncoder: per-slice codecs and residuals of a worker.
#include "common/compression/push_encoder.h"

#include "common/error.h"

namespace pshard::compression {

PushEncoder::PushEncoder(const Settings& settings, uint32_t worker_rank, size_t num_slices)
    : settings_(settings),
      rank_(worker_rank),
      probe_(make_codec({settings.push, settings.ratio, 0})),
      slices_(num_slices) {}

Encoding PushEncoder::push_encoding(uint64_t tensor_bytes) const {
  return settings_.applies_to(tensor_bytes) ? settings_.push : Encoding::NONE;
}

Encoding PushEncoder::pull_encoding(uint64_t tensor_bytes) const {
  return settings_.applies_to(tensor_bytes) ? settings_.pull : Encoding::NONE;
}

size_t PushEncoder::encode(uint32_t slice_id, const float* grad, size_t n, uint8_t* out) {
  if (slice_id >= slices_.size())
    throw Error("push encoder: slice " + std::to_string(slice_id) + " is not in the layout");
  SliceEncoder* e;
  {
    std::lock_guard<std::mutex> lock(slices_mu);
    if (!slices_[slice_id]) {
      slices_[slice_id] = std::make_unique<SliceEncoder>();
      // randomk: a different sample on every worker and slice, the same one run after run.
      const uint64_t seed = (uint64_t{rank_} << 32) ^ slice_id ^ 0x9e3779b97f4a7c15ull;
      slices_[slice_id]->codec = make_codec({settings_.push, settings_.ratio, seed});
    }
    e = slices_[slice_id].get();
  }
  std::lock_guard<std::mutex> lock(e->mu);
  if (settings_.error_feedback && e->codec->drops_information()) return e->feedback.encode(*e->codec, grad, n, out);
  return e->codec->encode(grad, n, out);
}

}  // namespace pshard::compression
