// PushEncoder: per-slice codecs and residuals of a worker.
#include "common/compression/push_encoder.h"

#include <algorithm>
#include <cstdint>

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

PushEncoder::SliceEncoder& PushEncoder::slice(uint32_t slice_id) {
  if (slice_id >= slices_.size())
    throw Error("push encoder: slice " + std::to_string(slice_id) + " is not in the layout");
  std::lock_guard<std::mutex> lock(slices_mu);
  if (!slices_[slice_id]) {
    slices_[slice_id] = std::make_unique<SliceEncoder>();
    // randomk: a different sample on every worker and slice, the same one run after run.
    const uint64_t seed = (uint64_t{rank_} << 32) ^ slice_id ^ 0x9e3779b97f4a7c15ull;
    slices_[slice_id]->codec = make_codec({settings_.push, settings_.ratio, seed});
  }
  return *slices_[slice_id];
}

size_t PushEncoder::encode(uint32_t slice_id, int64_t step, const float* grad, size_t n, uint8_t* out) {
  SliceEncoder& e = slice(slice_id);
  const int64_t keep = keep_step_.load();
  if (keep >= 0 && step > keep) hand_over_before(step);
  std::lock_guard<std::mutex> lock(e.mu);
  const bool feedback = settings_.error_feedback && e.codec->drops_information();
  const size_t bytes = feedback ? e.feedback.encode(*e.codec, grad, n, out) : e.codec->encode(grad, n, out);
  if (keep >= 0 && step == keep && e.codec->drops_information()) {
    std::lock_guard<std::mutex> kept(states_mu_);
    if (keep_step_.load() == step) kept_.push_back({slice_id, e.feedback.residual(), e.codec->save_state()});
  }
  return bytes;
}

void PushEncoder::keep_states_after(int64_t step) {
  if (!keeps_state()) return;
  hand_over_before(step);
  std::lock_guard<std::mutex> lock(states_mu_);
  if (keep_step_.load() < step) keep_step_ = step;
}

void PushEncoder::keep_current_states(int64_t step) {
  if (!keeps_state()) return;
  if (keep_step_.load() == step) return;  // kept as its encodes came
  hand_over_before(step);
  std::vector<ResidualSlice> states;
  {
    std::lock_guard<std::mutex> lock(slices_mu);
    for (size_t id = 0; id < slices_.size(); ++id) {
      SliceEncoder* e = slices_[id].get();
      if (e == nullptr) continue;
      std::lock_guard<std::mutex> slice_lock(e->mu);
      if (!e->codec->drops_information()) continue;
      states.push_back({static_cast<uint32_t>(id), e->feedback.residual(), e->codec->save_state()});
    }
  }
  std::lock_guard<std::mutex> lock(states_mu_);
  kept_ = std::move(states);
  keep_step_ = step;
}

void PushEncoder::flush() { hand_over_before(INT64_MAX); }

void PushEncoder::hand_over_before(int64_t step) {
  std::vector<ResidualSlice> states;
  int64_t of = -1;
  {
    std::lock_guard<std::mutex> lock(states_mu_);
    of = keep_step_.load();
    if (of < 0 || of >= step) return;
    states.swap(kept_);
    keep_step_ = -1;
  }
  std::sort(states.begin(), states.end(),
            [](const ResidualSlice& a, const ResidualSlice& b) { return a.slice < b.slice; });
  if (sink_) sink_(of, std::move(states));
}

void PushEncoder::restore(const std::vector<ResidualSlice>& states) {
  for (const ResidualSlice& r : states) {
    SliceEncoder& e = slice(r.slice);
    std::lock_guard<std::mutex> lock(e.mu);
    e.feedback.set_residual(r.residual);
    e.codec->load_state(r.codec_state);
  }
}

}  // namespace pshard::compression
