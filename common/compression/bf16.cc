// bf16: the upper 16 bits of a float32, round to nearest even (relative error <= 2^-8, float32's range).
#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/compression/codec.h"
#include "common/compression/dense.h"
#include "common/util/bf16.h"

namespace pshard::compression {
namespace {

// Blocks through aligned local arrays keep the loops free of per-element memcpy calls, so that the compiler
// vectorises them with the build's baseline ISA (SSE2: decode went from 170 to ~20 us per 200k floats).
constexpr size_t kBlock = 1024;

size_t encode_portable(const float* in, size_t n, uint8_t* out) {
  alignas(64) uint32_t x[kBlock];
  alignas(64) uint16_t h[kBlock];
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    std::memcpy(x, in + i, m * sizeof(float));
    for (size_t j = 0; j < m; ++j) h[j] = bf16_of_bits(x[j]);
    std::memcpy(out + 2 * i, h, m * 2);
  }
  return n;
}

void decode_portable(const uint8_t* in, size_t n, float* out) {
  alignas(64) uint16_t h[kBlock];
  alignas(64) uint32_t x[kBlock];
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    std::memcpy(h, in + 2 * i, m * 2);
    for (size_t j = 0; j < m; ++j) x[j] = static_cast<uint32_t>(h[j]) << 16;
    std::memcpy(out + i, x, m * sizeof(float));
  }
}

#if defined(__x86_64__)
// AVX2, 16 values per iteration (8 to decode), the same arithmetic as bf16_of_bits (common/util/bf16.h): bit for bit,
// which bf16_test checks by converting values alone (the scalar tail) and in runs (this path): 7.2 -> ~27 GB/s of
// float32 in on this machine's CPU, fp16's F16C speed. The build's baseline is x86-64 (SSE2), so the AVX2 code is
// chosen at run time.
bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

__attribute__((target("avx2"))) __m256i to_bf16_avx2(__m256i x) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
  // |x| > infinity's bits is a NaN; both sides are below 2^31, so the signed compare is right.
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(rounded, quiet, nan);  // 16-bit results in 32-bit lanes
}

__attribute__((target("avx2"))) size_t encode_avx2(const float* in, size_t n, uint8_t* out) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = to_bf16_avx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    const __m256i b = to_bf16_avx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 8)));
    // packus packs within 128-bit lanes (a0-3 b0-3 | a4-7 b4-7); the permute puts the quarters in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2 * i), packed);
  }
  return i;
}

__attribute__((target("avx2"))) size_t decode_avx2(const uint8_t* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_slli_epi32(h, 16));
  }
  return i;
}
#else
bool has_avx2() { return false; }
size_t encode_avx2(const float*, size_t, uint8_t*) { return 0; }
size_t decode_avx2(const uint8_t*, size_t, float*) { return 0; }
#endif

class Bf16Codec final : public Codec {
 public:
  Encoding encoding() const override { return Encoding::BF16; }
  size_t max_encoded_bytes(size_t n) const override { return n * 2; }
  size_t encode(const float* in, size_t n, uint8_t* out) override {
    const size_t done = has_avx2() ? encode_avx2(in, n, out) : 0;
    encode_portable(in + done, n - done, out + 2 * done);
    return n * 2;
  }
  CheckResult check(const uint8_t*, size_t bytes, size_t n) const override { return check_dense("bf16", 2, bytes, n); }
  void decode(const uint8_t* in, size_t, size_t n, float* out) const override {
    const size_t done = has_avx2() ? decode_avx2(in, n, out) : 0;
    decode_portable(in + 2 * done, n - done, out + done);
  }
  bool drops_information() const override { return false; }
};

}  // namespace

std::unique_ptr<Codec> make_bf16_codec() { return std::make_unique<Bf16Codec>(); }

}  // namespace pshard::compression
