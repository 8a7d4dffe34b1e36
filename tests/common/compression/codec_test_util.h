// Helpers of the codec tests: random gradients, encode/decode round trips through a codec's public interface.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "common/compression/codec.h"

namespace pshard::compression::testing {

inline std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<uint8_t> encode(Codec& c, const std::vector<float>& in) {
  std::vector<uint8_t> bytes(c.max_encoded_bytes(in.size()));
  bytes.resize(c.encode(in.data(), in.size(), bytes.data()));
  return bytes;
}

// Checks with the receivers' entry point (what a server runs), then decodes.
inline std::vector<float> decode(Encoding e, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> out(n, -1.0f);
  CheckResult r = check_encoded(e, bytes.data(), bytes.size(), n);
  if (!r.ok()) return {};
  decode_encoded(e, bytes.data(), bytes.size(), n, out.data());
  return out;
}

}  // namespace pshard::compression::testing
