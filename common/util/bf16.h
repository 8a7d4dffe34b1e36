// bfloat16: the upper 16 bits of a float32 (float32's range, 8 bits of mantissa), rounded to nearest even. One scalar
// conversion for everything that stores or sends bf16 (the bf16 codec, tables stored as bf16).
#pragma once

#include <cstdint>
#include <cstring>

namespace pshard {

// The bf16 of a float's bits, round to nearest even; a NaN stays a NaN (quiet bit set: rounding could carry its
// mantissa into infinity).
inline uint16_t bf16_of_bits(uint32_t x) {
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t quiet = (x >> 16) | 0x40u;
  const uint32_t nan = 0u - static_cast<uint32_t>((x & 0x7fffffffu) > 0x7f800000u);  // all ones for a NaN
  return static_cast<uint16_t>((rounded & ~nan) | (quiet & nan));
}

inline uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return bf16_of_bits(x);
}

inline float from_bf16(uint16_t h) {
  const uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

}  // namespace pshard
