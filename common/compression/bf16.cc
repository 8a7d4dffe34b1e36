// bf16: the upper 16 bits of a float32, round to nearest even (relative error <= 2^-8, float32's range).
#include <cstring>

#include "common/compression/codec.h"
#include "common/compression/dense.h"

namespace pshard::compression {
namespace {

uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays a NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

class Bf16Codec final : public Codec {
 public:
  Encoding encoding() const override { return Encoding::BF16; }
  size_t max_encoded_bytes(size_t n) const override { return n * 2; }
  size_t encode(const float* in, size_t n, uint8_t* out) override {
    for (size_t i = 0; i < n; ++i) {
      const uint16_t h = to_bf16(in[i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
    return n * 2;
  }
  CheckResult check(const uint8_t*, size_t bytes, size_t n) const override { return check_dense("bf16", 2, bytes, n); }
  void decode(const uint8_t* in, size_t, size_t n, float* out) const override {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, in + 2 * i, 2);
      const uint32_t x = static_cast<uint32_t>(h) << 16;
      std::memcpy(out + i, &x, sizeof(float));
    }
  }
  bool drops_information() const override { return false; }
};

}  // namespace

std::unique_ptr<Codec> make_bf16_codec() { return std::make_unique<Bf16Codec>(); }

}  // namespace pshard::compression
