// topk: the k = ceil(ratio x n) values of largest magnitude, as sorted indices plus values (see sparse.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/compression/codec.h"
#include "common/compression/sparse.h"
#include "common/error.h"

namespace pshard::compression {
namespace {

class TopkCodec final : public Codec {
 public:
  explicit TopkCodec(double ratio) : ratio_(ratio) {
    if (!(ratio > 0 && ratio <= 1)) throw Error("topk: compression_ratio " + std::to_string(ratio) + " not in (0, 1]");
  }
  Encoding encoding() const override { return Encoding::TOPK; }
  size_t max_encoded_bytes(size_t n) const override { return sparse_count(ratio_, n) * 8; }
  size_t encode(const float* in, size_t n, uint8_t* out) override {
    const size_t k = sparse_count(ratio_, n);
    candidates_.clear();
    if (n < kSampledFrom || k * 8 > n || !sample_candidates(in, n, k)) {
      candidates_.resize(n);
      for (size_t i = 0; i < n; ++i) candidates_[i] = static_cast<uint32_t>(i);
    }
    select(in, k);
    return write_sparse(indices_, in, out);
  }
  CheckResult check(const uint8_t* in, size_t bytes, size_t n) const override {
    return check_sparse("topk", in, bytes, n);
  }
  void decode(const uint8_t* in, size_t bytes, size_t n, float* out) const override {
    decode_sparse(in, bytes, n, out);
  }
  bool drops_information() const override { return true; }

 private:
  // A NaN ranks above everything (it is sent, and the server's weights show the broken gradient) and keeps the
  // comparison a strict weak order.
  static float magnitude(float x) { return std::isnan(x) ? INFINITY : std::fabs(x); }

  // Large slices: a threshold from a strided sample of 4096 magnitudes, set so that about twice k values pass it,
  // then one pass keeps the indices at or above it. When at least k pass, every one of the k largest is among them
  // (the k-th largest is then >= the threshold) and select() picks exactly the set it would pick from all n; when
  // fewer pass (an unlucky sample) the caller falls back to all n. One comparison per value instead of a selection
  // over all of them: ~900 -> ~150 us per 200k floats.
  static constexpr size_t kSampledFrom = 16384;
  bool sample_candidates(const float* in, size_t n, size_t k) {
    constexpr size_t kSample = 4096;
    const size_t stride = n / kSample;
    magnitude_.resize(kSample);
    for (size_t j = 0; j < kSample; ++j) magnitude_[j] = magnitude(in[j * stride]);
    const size_t rank = std::min(kSample - 1, 2 * k * kSample / n + 8);
    std::nth_element(magnitude_.begin(), magnitude_.begin() + static_cast<std::ptrdiff_t>(rank), magnitude_.end(),
                     std::greater<float>());
    const float threshold = magnitude_[rank];
    for (size_t i = 0; i < n; ++i) {
      if (magnitude(in[i]) >= threshold) candidates_.push_back(static_cast<uint32_t>(i));
    }
    return candidates_.size() >= k;
  }

  // The k largest magnitudes among candidates_ (increasing indices), by selection (linear time), then one pass in
  // index order: indices come out sorted; ties at the k-th magnitude go to the lowest indices.
  void select(const float* in, size_t k) {
    magnitude_.resize(candidates_.size());
    for (size_t j = 0; j < candidates_.size(); ++j) magnitude_[j] = magnitude(in[candidates_[j]]);
    std::nth_element(magnitude_.begin(), magnitude_.begin() + static_cast<std::ptrdiff_t>(k - 1), magnitude_.end(),
                     std::greater<float>());
    const float threshold = magnitude_[k - 1];
    size_t above = 0;  // values strictly above the threshold all go; ties fill the rest in index order
    for (uint32_t i : candidates_) above += magnitude(in[i]) > threshold;
    size_t ties = k - above;
    indices_.clear();
    for (uint32_t i : candidates_) {
      if (indices_.size() == k) break;
      const float m = magnitude(in[i]);
      if (m > threshold) {
        indices_.push_back(i);
      } else if (m == threshold && ties > 0) {
        indices_.push_back(i);
        --ties;
      }
    }
  }

  double ratio_;
  std::vector<float> magnitude_;
  std::vector<uint32_t> candidates_, indices_;
};

}  // namespace

std::unique_ptr<Codec> make_topk_codec(double ratio) { return std::make_unique<TopkCodec>(ratio); }

}  // namespace pshard::compression
