// onebit: signs and the mean magnitude; a scale of -1/NaN or set padding bits refused.
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

TEST(OnebitCodec, SignsTimesMeanMagnitude) {
  const std::vector<float> in = {1.0f, -2.0f, 3.0f, -4.0f, 0.0f, -0.0f, 5.0f, 6.0f, -7.0f, 2.0f};  // mean |x| = 3
  auto c = make_codec({Encoding::ONEBIT});
  std::vector<uint8_t> bytes = encode(*c, in);
  ASSERT_EQ(bytes.size(), 4u + 2u);
  const std::vector<float> out = decode(Encoding::ONEBIT, bytes, in.size());
  EXPECT_EQ(out, (std::vector<float>{3, -3, 3, -3, 3, -3, 3, 3, -3, 3}));
}

TEST(OnebitCodec, LosslessForValuesOfOneMagnitude) {
  const std::vector<float> in = {0.25f, -0.25f, -0.25f, 0.25f, 0.25f, 0.25f, -0.25f, -0.25f, 0.25f};
  auto c = make_codec({Encoding::ONEBIT});
  EXPECT_EQ(decode(Encoding::ONEBIT, encode(*c, in), in.size()), in);
}

TEST(OnebitCodec, BadEncodingsRefused) {
  std::vector<uint8_t> b(4 + 2, 0);
  EXPECT_EQ(check_encoded(Encoding::ONEBIT, b.data(), 5, 10).kind, CheckResult::kWrongLength);
  float scale = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(b.data(), &scale, 4);
  CheckResult r = check_encoded(Encoding::ONEBIT, b.data(), b.size(), 10);
  EXPECT_EQ(r.kind, CheckResult::kBadContent);
  EXPECT_NE(r.why.find("not a finite number"), std::string::npos) << r.why;
  scale = 1.0f;
  std::memcpy(b.data(), &scale, 4);
  EXPECT_TRUE(check_encoded(Encoding::ONEBIT, b.data(), b.size(), 10).ok());
  b[5] = 0x04;  // value 10 does not exist: bit 2 of the second sign byte is padding
  r = check_encoded(Encoding::ONEBIT, b.data(), b.size(), 10);
  EXPECT_EQ(r.kind, CheckResult::kBadContent);
  EXPECT_NE(r.why.find("padding"), std::string::npos) << r.why;
}

}  // namespace
}  // namespace pshard::compression
