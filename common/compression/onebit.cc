// onebit: the signs of n values plus one scale (their mean magnitude): a float32, then ceil(n / 8) bytes of sign
// bits, least significant bit first (set: -scale, clear: +scale). Meant for use with error feedback.
#include <cmath>
#include <cstring>
#include <string>

#include "common/compression/codec.h"

namespace pshard::compression {
namespace {

class OnebitCodec final : public Codec {
 public:
  Encoding encoding() const override { return Encoding::ONEBIT; }
  size_t max_encoded_bytes(size_t n) const override { return sizeof(float) + (n + 7) / 8; }
  size_t encode(const float* in, size_t n, uint8_t* out) override {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += std::fabs(in[i]);
    const float scale = n > 0 ? static_cast<float>(sum / static_cast<double>(n)) : 0.0f;
    std::memcpy(out, &scale, sizeof(scale));
    uint8_t* bits = out + sizeof(float);
    std::memset(bits, 0, (n + 7) / 8);
    for (size_t i = 0; i < n; ++i) {
      if (std::signbit(in[i])) bits[i / 8] = static_cast<uint8_t>(bits[i / 8] | (1u << (i % 8)));
    }
    return max_encoded_bytes(n);
  }
  CheckResult check(const uint8_t* in, size_t bytes, size_t n) const override {
    if (bytes != max_encoded_bytes(n)) {
      return {CheckResult::kWrongLength, "onebit payload of " + std::to_string(bytes) + " bytes, expected " +
                                             std::to_string(max_encoded_bytes(n)) + " (a scale and " +
                                             std::to_string(n) + " sign bits)"};
    }
    float scale;
    std::memcpy(&scale, in, sizeof(scale));
    if (!std::isfinite(scale) || scale < 0) {
      return {CheckResult::kBadContent, "onebit scale " + std::to_string(scale) + " is not a finite number >= 0"};
    }
    if (n % 8 != 0 && (in[bytes - 1] >> (n % 8)) != 0) {
      return {CheckResult::kBadContent, "onebit padding bits after value " + std::to_string(n) + " are not zero"};
    }
    return {};
  }
  void decode(const uint8_t* in, size_t, size_t n, float* out) const override {
    float scale;
    std::memcpy(&scale, in, sizeof(scale));
    const uint8_t* bits = in + sizeof(float);
    for (size_t i = 0; i < n; ++i) out[i] = (bits[i / 8] >> (i % 8)) & 1u ? -scale : scale;
  }
  bool drops_information() const override { return true; }
};

}  // namespace

std::unique_ptr<Codec> make_onebit_codec() { return std::make_unique<OnebitCodec>(); }

}  // namespace pshard::compression
