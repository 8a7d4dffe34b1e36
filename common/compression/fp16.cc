// fp16: IEEE 754 half precision, round to nearest even (relative error <= 2^-11 in the normal range,
// values beyond 65504 become infinity, below 2^-24 zero).
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "common/compression/codec.h"
#include "common/compression/dense.h"
#include "common/compression/fp16.h"

namespace pshard::compression {
namespace {

uint16_t to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));  // inf, NaN
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // too large: infinity
  if (e <= 0) {                                                 // a subnormal half, or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent rounds up correctly (to inf too)
  return static_cast<uint16_t>(h);
}

float from_half(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0x1fu) {
    x = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);  // zero or a subnormal: mant x 2^-24
    std::memcpy(&x, &v, sizeof(x));
    x |= sign;
  } else {
    x = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

#if defined(__x86_64__)
// The CPU's own conversion (F16C, 8 values per instruction, IEEE round to nearest even like to_half): the scalar
// loop costs ~800 us per 200k floats, this ~30. Used when the CPU has it; the tail and other CPUs take the scalar path.
// CPUID leaf 1, ECX: AVX is bit 28, F16C bit 29 (clang's __builtin_cpu_supports does not know "f16c").
bool has_f16c() {
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 28)) && (c & (1u << 29));
  }();
  return yes;
}

__attribute__((target("avx,f16c"))) size_t encode_f16c(const float* in, size_t n, uint8_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
  }
  return i;
}

__attribute__((target("avx,f16c"))) size_t round_f16c(float* x, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
  }
  return i;
}

__attribute__((target("avx,f16c"))) size_t decode_f16c(const uint8_t* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i))));
  }
  return i;
}
#else
bool has_f16c() { return false; }
size_t encode_f16c(const float*, size_t, uint8_t*) { return 0; }
size_t decode_f16c(const uint8_t*, size_t, float*) { return 0; }
size_t round_f16c(float*, size_t) { return 0; }
#endif

class Fp16Codec final : public Codec {
 public:
  Encoding encoding() const override { return Encoding::FP16; }
  size_t max_encoded_bytes(size_t n) const override { return n * 2; }
  size_t encode(const float* in, size_t n, uint8_t* out) override {
    for (size_t i = has_f16c() ? encode_f16c(in, n, out) : 0; i < n; ++i) {
      const uint16_t h = to_half(in[i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
    return n * 2;
  }
  CheckResult check(const uint8_t*, size_t bytes, size_t n) const override { return check_dense("fp16", 2, bytes, n); }
  void decode(const uint8_t* in, size_t, size_t n, float* out) const override {
    for (size_t i = has_f16c() ? decode_f16c(in, n, out) : 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, in + 2 * i, 2);
      out[i] = from_half(h);
    }
  }
  bool drops_information() const override { return false; }
};

}  // namespace

std::unique_ptr<Codec> make_fp16_codec() { return std::make_unique<Fp16Codec>(); }

void round_to_fp16(float* x, size_t n) {
  for (size_t i = has_f16c() ? round_f16c(x, n) : 0; i < n; ++i) x[i] = from_half(to_half(x[i]));
}

}  // namespace pshard::compression
