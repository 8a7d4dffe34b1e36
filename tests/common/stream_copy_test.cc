// copy_past_cache and copy_floats_past_cache: exact copies at every size class (below the streaming threshold,
// whole cache lines, tails) and destination alignment, and the first NaN or infinity found wherever it lies (the
// unaligned head, the streamed lines, the tail).
#include "common/util/stream_copy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

namespace pshard {
namespace {

const std::vector<size_t> kSizes = {0, 1, 3, 15, 16, 17, 1023, 1024, 1025, 4095, 4096, 4097, 16387, 262144, 262147};

std::vector<float> pattern(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.25f - 1000.0f;
  return v;
}

TEST(StreamCopy, CopiesEveryByteAtEverySizeAndAlignment) {
  for (const size_t n : kSizes) {
    for (size_t shift = 0; shift < 4; ++shift) {
      const std::vector<float> src = pattern(n + 3);
      std::vector<float> dst(n + 8, -7.0f);
      copy_past_cache(dst.data() + shift, src.data() + (3 - shift), n * sizeof(float));
      for (size_t i = 0; i < dst.size(); ++i) {
        const float want = i >= shift && i < shift + n ? src[i - shift + (3 - shift)] : -7.0f;
        ASSERT_EQ(dst[i], want) << "n " << n << " shift " << shift << " index " << i;
      }
    }
  }
  // Byte granularity: an odd length at an odd address.
  std::vector<char> src(10001), dst(10010, 'x');
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7);
  copy_past_cache(dst.data() + 1, src.data(), 9999);
  EXPECT_EQ(std::memcmp(dst.data() + 1, src.data(), 9999), 0);
  EXPECT_EQ(dst[0], 'x');
  EXPECT_EQ(dst[10000], 'x');
}

TEST(StreamCopy, FloatCopiesFindTheFirstNonFiniteValueWhereverItIs) {
  const float kBad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::signaling_NaN()};
  for (const size_t n : kSizes) {
    for (size_t shift = 0; shift < 4; ++shift) {
      std::vector<float> src = pattern(n);
      std::vector<float> dst(n + 4, 0.0f);
      ASSERT_EQ(copy_floats_past_cache(dst.data() + shift, src.data(), n), n) << "n " << n << ": none";
      if (n == 0) continue;
      ASSERT_EQ(std::memcmp(dst.data() + shift, src.data(), n * sizeof(float)), 0) << "n " << n;
      // The largest finite float is not one.
      src[n / 2] = std::numeric_limits<float>::max();
      ASSERT_EQ(copy_floats_past_cache(dst.data() + shift, src.data(), n), n) << "n " << n << ": max";
      for (const size_t at : {size_t{0}, size_t{1}, n / 3, n / 2, n - 2, n - 1}) {
        if (at >= n) continue;
        for (const float bad : kBad) {
          std::vector<float> s = pattern(n);
          s[at] = bad;
          if (at + 1 < n) s[n - 1] = kBad[1];  // a later one does not hide the first
          ASSERT_EQ(copy_floats_past_cache(dst.data() + shift, s.data(), n), at)
              << "n " << n << " shift " << shift << " bad " << bad << " at " << at;
          ASSERT_EQ(std::memcmp(dst.data() + shift, s.data(), n * sizeof(float)), 0) << "n " << n;
        }
      }
    }
  }
}

}  // namespace
}  // namespace pshard
