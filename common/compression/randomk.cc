// randomk: k = ceil(ratio x n) values at indices drawn uniformly without replacement (Floyd's sample), sent like topk.
#include <algorithm>
#include <random>
#include <sstream>
#include <unordered_set>
#include <vector>

#include "common/compression/codec.h"
#include "common/compression/sparse.h"
#include "common/error.h"

namespace pshard::compression {
namespace {

class RandomkCodec final : public Codec {
 public:
  RandomkCodec(double ratio, uint64_t seed) : ratio_(ratio), rng_(seed) {
    if (!(ratio > 0 && ratio <= 1)) {
      throw Error("randomk: compression_ratio " + std::to_string(ratio) + " not in (0, 1]");
    }
  }
  Encoding encoding() const override { return Encoding::RANDOMK; }
  size_t max_encoded_bytes(size_t n) const override { return sparse_count(ratio_, n) * 8; }
  size_t encode(const float* in, size_t n, uint8_t* out) override {
    const size_t k = sparse_count(ratio_, n);
    // Floyd: k draws, each a distinct index, in O(k) whatever n is.
    chosen_.clear();
    for (size_t j = n - k; j < n; ++j) {
      const uint32_t t = static_cast<uint32_t>(std::uniform_int_distribution<uint64_t>(0, j)(rng_));
      chosen_.insert(chosen_.count(t) ? static_cast<uint32_t>(j) : t);
    }
    indices_.assign(chosen_.begin(), chosen_.end());
    std::sort(indices_.begin(), indices_.end());
    return write_sparse(indices_, in, out);
  }
  CheckResult check(const uint8_t* in, size_t bytes, size_t n) const override {
    return check_sparse("randomk", in, bytes, n);
  }
  void decode(const uint8_t* in, size_t bytes, size_t n, float* out) const override {
    decode_sparse(in, bytes, n, out);
  }
  bool drops_information() const override { return true; }
  std::string save_state() const override {
    std::ostringstream out;
    out << rng_;
    return out.str();
  }
  void load_state(const std::string& state) override {
    std::istringstream in(state);
    std::mt19937_64 rng;
    in >> rng;
    if (!in) throw Error("randomk: a saved sampler state that does not parse");
    rng_ = rng;
  }

 private:
  double ratio_;
  std::mt19937_64 rng_;
  std::unordered_set<uint32_t> chosen_;
  std::vector<uint32_t> indices_;
};

}  // namespace

std::unique_ptr<Codec> make_randomk_codec(double ratio, uint64_t seed) {
  return std::make_unique<RandomkCodec>(ratio, seed);
}

}  // namespace pshard::compression
