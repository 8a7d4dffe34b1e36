// The codec table: make_codec by encoding, names, and the receivers' stateless check/decode.
#include "common/compression/codec.h"

#include <array>

#include "common/error.h"

namespace pshard::compression {
namespace {

constexpr std::array<const char*, 6> kNames = {"none", "fp16", "bf16", "topk", "randomk", "onebit"};

// One codec per encoding for receivers: only their const members are called, so sharing them is safe.
const Codec& receiver(Encoding e) {
  static const std::array<std::unique_ptr<Codec>, kNames.size()> codecs = {
      make_none_codec(),     make_fp16_codec(),           make_bf16_codec(),
      make_topk_codec(0.01), make_randomk_codec(0.01, 0), make_onebit_codec()};
  if (!known_encoding(e)) throw Error("unknown payload encoding " + std::to_string(static_cast<unsigned>(e)));
  return *codecs[static_cast<size_t>(e)];
}

}  // namespace

bool known_encoding(Encoding e) { return static_cast<size_t>(e) < kNames.size(); }

const char* encoding_name(Encoding e) { return known_encoding(e) ? kNames[static_cast<size_t>(e)] : "unknown"; }

bool encoding_from_name(const std::string& name, Encoding* out) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) {
      *out = static_cast<Encoding>(i);
      return true;
    }
  }
  return false;
}

std::unique_ptr<Codec> make_codec(const CodecParams& p) {
  switch (p.encoding) {
    case Encoding::NONE: return make_none_codec();
    case Encoding::FP16: return make_fp16_codec();
    case Encoding::BF16: return make_bf16_codec();
    case Encoding::TOPK: return make_topk_codec(p.ratio);
    case Encoding::RANDOMK: return make_randomk_codec(p.ratio, p.seed);
    case Encoding::ONEBIT: return make_onebit_codec();
  }
  throw Error("unknown payload encoding " + std::to_string(static_cast<unsigned>(p.encoding)));
}

CheckResult check_encoded(Encoding e, const void* data, size_t bytes, size_t n) {
  if (!known_encoding(e)) {
    return {CheckResult::kBadContent, "unknown encoding " + std::to_string(static_cast<unsigned>(e))};
  }
  return receiver(e).check(static_cast<const uint8_t*>(data), bytes, n);
}

void decode_encoded(Encoding e, const void* data, size_t bytes, size_t n, float* out) {
  receiver(e).decode(static_cast<const uint8_t*>(data), bytes, n, out);
}

}  // namespace pshard::compression
