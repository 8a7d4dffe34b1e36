// copy_past_cache: SSE2 non-temporal stores (every x86-64 CPU has them), memcpy elsewhere.
#include "common/util/stream_copy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PSHARD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define PSHARD_SANITIZED 1
#endif
#endif

#if defined(__x86_64__) && !defined(PSHARD_SANITIZED)
#define PSHARD_STREAM_STORES 1
#include <emmintrin.h>
#endif

namespace pshard {
namespace {

size_t first_non_finite(const float* v, size_t n) {
  size_t i = 0;
  while (i < n && std::isfinite(v[i])) ++i;
  return i;
}

#ifdef PSHARD_STREAM_STORES
// Below a few cache lines the fence costs more than the stores save.
constexpr size_t kSmall = 4096;

// Exponent bits all ones: NaN or an infinity.
constexpr uint32_t kExponent = 0x7f800000u;

// Copies `bytes` (from a 16-byte aligned `d`), one cache line per iteration; with kCheck, ORs into the result each
// 32-bit lane that has all exponent bits set (only meaningful for float data).
template <bool kCheck>
__m128i stream_lines(char* d, const char* s, size_t bytes, size_t& done) {
  const __m128i exponent = _mm_set1_epi32(static_cast<int>(kExponent));
  __m128i bad = _mm_setzero_si128();
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    if (kCheck) {
      const __m128i ab = _mm_or_si128(_mm_cmpeq_epi32(_mm_and_si128(a, exponent), exponent),
                                      _mm_cmpeq_epi32(_mm_and_si128(b, exponent), exponent));
      const __m128i ce = _mm_or_si128(_mm_cmpeq_epi32(_mm_and_si128(c, exponent), exponent),
                                      _mm_cmpeq_epi32(_mm_and_si128(e, exponent), exponent));
      bad = _mm_or_si128(bad, _mm_or_si128(ab, ce));
    }
  }
  done = i;
  return bad;
}
#endif

}  // namespace

void copy_past_cache(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;  // nothing to copy, and an empty buffer's pointer may be null (memcpy must not see one)
#ifdef PSHARD_STREAM_STORES
  if (bytes < kSmall) {
    std::memcpy(dst, src, bytes);
    return;
  }
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const size_t head = (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16;  // plain stores up to a 16-byte boundary
  std::memcpy(d, s, head);
  size_t done = 0;
  stream_lines<false>(d + head, s + head, bytes - head, done);
  std::memcpy(d + head + done, s + head + done, bytes - head - done);
  _mm_sfence();  // the streamed stores are weakly ordered: complete them before any later release store
#else
  std::memcpy(dst, src, bytes);
#endif
}

size_t copy_floats_past_cache(float* dst, const float* src, size_t n) {
  if (n == 0) return 0;  // as above
#ifdef PSHARD_STREAM_STORES
  // A float pointer is 4-byte aligned: plain stores of whole floats up to the 16-byte boundary.
  const size_t head = std::min<size_t>(n, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16 / sizeof(float));
  if (n * sizeof(float) >= kSmall) {
    std::memcpy(dst, src, head * sizeof(float));
    size_t done = 0;
    const __m128i bad = stream_lines<true>(reinterpret_cast<char*>(dst + head),
                                           reinterpret_cast<const char*>(src + head), (n - head) * sizeof(float), done);
    const size_t tail = head + done / sizeof(float);
    std::memcpy(dst + tail, src + tail, (n - tail) * sizeof(float));
    _mm_sfence();
    const bool any = _mm_movemask_epi8(bad) != 0 || first_non_finite(src, head) < head ||
                     first_non_finite(src + tail, n - tail) < n - tail;
    return any ? first_non_finite(src, n) : n;  // where, only when there is one
  }
#endif
  std::memcpy(dst, src, n * sizeof(float));
  return first_non_finite(src, n);
}

}  // namespace pshard
