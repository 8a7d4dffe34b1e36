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
    // The k-th largest magnitude by selection (linear time), then one pass in index order: indices come out sorted.
    magnitude_.resize(n);
    for (size_t i = 0; i < n; ++i) magnitude_[i] = magnitude(in[i]);
    std::nth_element(magnitude_.begin(), magnitude_.begin() + static_cast<std::ptrdiff_t>(k - 1), magnitude_.end(),
                     std::greater<float>());
    const float threshold = magnitude_[k - 1];
    size_t above = 0;  // values strictly above the threshold all go; ties fill the rest in index order
    for (size_t i = 0; i < n; ++i) above += magnitude(in[i]) > threshold;
    size_t ties = k - above;
    indices_.clear();
    for (size_t i = 0; i < n && indices_.size() < k; ++i) {
      const float m = magnitude(in[i]);
      if (m > threshold) {
        indices_.push_back(static_cast<uint32_t>(i));
      } else if (m == threshold && ties > 0) {
        indices_.push_back(static_cast<uint32_t>(i));
        --ties;
      }
    }
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

  double ratio_;
  std::vector<float> magnitude_;
  std::vector<uint32_t> indices_;
};

}  // namespace

std::unique_ptr<Codec> make_topk_codec(double ratio) { return std::make_unique<TopkCodec>(ratio); }

}  // namespace pshard::compression
