// bf16: exact for values with 8 significant bits, relative error <= 2^-8, float32's range, NaN kept.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/compression/codec.h"
#include "tests/common/compression/codec_test_util.h"

namespace pshard::compression {
namespace {

using testing::decode;
using testing::encode;
using testing::random_values;

std::vector<float> round_trip(const std::vector<float>& in) {
  auto c = make_codec({Encoding::BF16});
  std::vector<uint8_t> bytes = encode(*c, in);
  EXPECT_EQ(bytes.size(), in.size() * 2);
  return decode(Encoding::BF16, bytes, in.size());
}

TEST(Bf16Codec, ExactForValuesBfloatCanHold) {
  const std::vector<float> in = {0.0f,
                                 -0.0f,
                                 1.0f,
                                 -3.0f,
                                 std::ldexp(1.0f, 100),
                                 255.0f,
                                 std::ldexp(1.0f, -130),
                                 std::numeric_limits<float>::infinity()};
  const std::vector<float> out = round_trip(in);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], in[i]) << i;
}

TEST(Bf16Codec, RelativeErrorBounded) {
  const std::vector<float> in = random_values(100000, 11, 1e-3f);
  const std::vector<float> out = round_trip(in);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_LE(std::fabs(out[i] - in[i]), std::fabs(in[i]) * std::ldexp(1.0f, -8)) << in[i];
  }
}

TEST(Bf16Codec, RoundsToNearestEvenAndKeepsNan) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7 (even: 1); 1 + 3 x 2^-8 rounds up to 1 + 2^-6.
  const std::vector<float> out = round_trip(
      {1.0f + std::ldexp(1.0f, -8), 1.0f + 3 * std::ldexp(1.0f, -8), std::numeric_limits<float>::quiet_NaN()});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(out[2]));
}

TEST(Bf16Codec, WrongLengthRefused) {
  std::vector<uint8_t> bytes(22);
  CheckResult r = check_encoded(Encoding::BF16, bytes.data(), bytes.size(), 10);
  EXPECT_EQ(r.kind, CheckResult::kWrongLength);
  EXPECT_NE(r.why.find("bf16 payload of 22 bytes, expected 20"), std::string::npos) << r.why;
}

}  // namespace
}  // namespace pshard::compression
