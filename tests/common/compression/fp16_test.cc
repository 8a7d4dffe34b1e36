// fp16: exact where half precision is exact, relative error <= 2^-11 in the normal range, IEEE rounding and limits.
#include "common/compression/fp16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/compression/codec.h"
#include "tests/common/compression/codec_test_util.h"

namespace pshard::compression {
namespace {

using testing::decode;
using testing::encode;
using testing::random_values;

// Each value alone (the scalar conversion) and 8 times in a row (the CPU's 8-wide F16C conversion, where the CPU
// has it): both must give the same bits.
std::vector<float> round_trip(const std::vector<float>& in) {
  auto c = make_codec({Encoding::FP16});
  std::vector<float> out;
  for (float v : in) {
    std::vector<uint8_t> one = encode(*c, {v});
    EXPECT_EQ(one.size(), 2u);
    const std::vector<float> back = decode(Encoding::FP16, one, 1);
    const std::vector<uint8_t> eight = encode(*c, std::vector<float>(8, v));
    for (size_t k = 0; k < 8; ++k) {
      EXPECT_EQ(std::memcmp(eight.data() + 2 * k, one.data(), 2), 0) << v << ": the 8-wide conversion differs";
    }
    out.push_back(back.empty() ? -1.0f : back[0]);
  }
  return out;
}

TEST(Fp16Codec, ExactForValuesHalfCanHold) {
  const std::vector<float> in = {0.0f,
                                 -0.0f,
                                 1.0f,
                                 -2.5f,
                                 0.125f,
                                 65504.0f,
                                 -65504.0f,
                                 1024.0f + 1.0f,
                                 std::ldexp(1.0f, -14),
                                 std::ldexp(1.0f, -24),
                                 std::ldexp(3.0f, -24)};
  const std::vector<float> out = round_trip(in);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i], in[i]) << i;
    EXPECT_EQ(std::signbit(out[i]), std::signbit(in[i])) << i;
  }
}

TEST(Fp16Codec, RelativeErrorBoundedInTheNormalRange) {
  const std::vector<float> in = random_values(100000, 7, 10.0f);
  const std::vector<float> out = round_trip(in);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (std::fabs(in[i]) < 6.2e-5f) continue;  // subnormal halves: absolute error <= 2^-25 instead
    EXPECT_LE(std::fabs(out[i] - in[i]), std::fabs(in[i]) * std::ldexp(1.0f, -11)) << in[i];
  }
}

TEST(Fp16Codec, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: even mantissa (1) wins; 1 + 3 x 2^-11 goes up to 1 + 2^-9.
  const std::vector<float> out =
      round_trip({1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11), 1.0f + std::ldexp(1.2f, -11)});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(out[2], 1.0f + std::ldexp(1.0f, -10));
}

TEST(Fp16Codec, OverflowUnderflowAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> out =
      round_trip({70000.0f, -1e30f, inf, std::ldexp(1.0f, -26), std::numeric_limits<float>::quiet_NaN()});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0], inf);
  EXPECT_EQ(out[1], -inf);
  EXPECT_EQ(out[2], inf);
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_TRUE(std::isnan(out[4]));
}

TEST(Fp16Codec, WrongLengthRefused) {
  std::vector<uint8_t> bytes(19);
  CheckResult r = check_encoded(Encoding::FP16, bytes.data(), bytes.size(), 10);
  EXPECT_EQ(r.kind, CheckResult::kWrongLength);
  EXPECT_NE(r.why.find("fp16 payload of 19 bytes, expected 20"), std::string::npos) << r.why;
}

// round_to_fp16 (what fp16 compute reads) gives the codec's round trip, bit for bit, on the 8-wide path and the tail,
// infinities and NaN included.
TEST(RoundToFp16, EqualsTheCodecsRoundTrip) {
  std::vector<float> in = random_values(1003, 11, 1000.0f);
  in[3] = 70000.0f;
  in[500] = -std::numeric_limits<float>::infinity();
  in[1001] = std::numeric_limits<float>::quiet_NaN();
  in[1002] = 1.0f + std::ldexp(1.0f, -11);  // halfway: rounds to 1 (the tail's scalar path)
  auto c = make_codec({Encoding::FP16});
  const std::vector<float> want = decode(Encoding::FP16, encode(*c, in), in.size());
  std::vector<float> got = in;
  round_to_fp16(got.data(), got.size());
  ASSERT_EQ(want.size(), got.size());
  EXPECT_EQ(std::memcmp(want.data(), got.data(), got.size() * sizeof(float)), 0);
  EXPECT_EQ(got[3], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(got[1001]));
  EXPECT_EQ(got[1002], 1.0f);
  EXPECT_NE(got[0], in[0]);  // random values are rarely halves already
}

}  // namespace
}  // namespace pshard::compression
