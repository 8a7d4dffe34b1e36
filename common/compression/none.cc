// none: raw float32, bit for bit (the default; what init and uncompressed jobs send).
#include <cstring>

#include "common/compression/codec.h"
#include "common/compression/dense.h"

namespace pshard::compression {
namespace {

class NoneCodec final : public Codec {
 public:
  Encoding encoding() const override { return Encoding::NONE; }
  size_t max_encoded_bytes(size_t n) const override { return n * sizeof(float); }
  size_t encode(const float* in, size_t n, uint8_t* out) override {
    std::memcpy(out, in, n * sizeof(float));
    return n * sizeof(float);
  }
  CheckResult check(const uint8_t*, size_t bytes, size_t n) const override {
    return check_dense("float32", sizeof(float), bytes, n);
  }
  void decode(const uint8_t* in, size_t, size_t n, float* out) const override {
    std::memcpy(out, in, n * sizeof(float));
  }
  bool drops_information() const override { return false; }
};

}  // namespace

std::unique_ptr<Codec> make_none_codec() { return std::make_unique<NoneCodec>(); }

}  // namespace pshard::compression
