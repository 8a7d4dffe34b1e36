// bf16: exact for values with 8 significant bits, relative error <= 2^-8, float32's range, NaN kept.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

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

// Every float32 bit pattern class (NaNs of both signs and payloads, infinities, subnormals, zeros, values that
// round up into the next binade or to infinity), converted in one run (the CPU's AVX2 path, 16 at a time, where the
// CPU has it) and each value alone (the scalar conversion): the same bits.
TEST(Bf16Codec, VectorAndScalarConversionsAgreeBitForBit) {
  std::mt19937 rng(7);
  std::vector<uint32_t> bits(4096 + 13);
  for (uint32_t& b : bits) b = static_cast<uint32_t>(rng());
  const uint32_t specials[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fffffffu,
                               0xffffffffu, 0x00000001u, 0x80007fffu, 0x00008000u, 0x3f808000u, 0x3f818000u,
                               0x7f7fffffu, 0xff7f8000u, 0x00000000u, 0x80000000u};
  for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); ++i) bits[17 * i] = specials[i];
  std::vector<float> in(bits.size());
  std::memcpy(in.data(), bits.data(), bits.size() * sizeof(float));
  auto c = make_codec({Encoding::BF16});
  const std::vector<uint8_t> run = encode(*c, in);
  ASSERT_EQ(run.size(), in.size() * 2);
  for (size_t i = 0; i < in.size(); ++i) {
    const std::vector<uint8_t> alone = encode(*c, {in[i]});
    ASSERT_EQ(alone.size(), 2u);
    ASSERT_EQ(std::memcmp(alone.data(), run.data() + 2 * i, 2), 0) << "float bits 0x" << std::hex << bits[i];
  }
  // Decoding: every one of the 65,536 bf16 patterns, in one run and alone.
  std::vector<uint8_t> all(65536 * 2);
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    std::memcpy(all.data() + 2 * h, &v, 2);
  }
  const std::vector<float> decoded = decode(Encoding::BF16, all, 65536);
  for (uint32_t h = 0; h < 65536; h += 1) {
    const std::vector<float> alone = decode(Encoding::BF16, {all[2 * h], all[2 * h + 1]}, 1);
    uint32_t a = 0, b = 0;
    std::memcpy(&a, &alone[0], 4);
    std::memcpy(&b, &decoded[h], 4);
    ASSERT_EQ(a, h << 16) << "bf16 0x" << std::hex << h;
    ASSERT_EQ(b, h << 16) << "bf16 0x" << std::hex << h;
  }
}

TEST(Bf16Codec, WrongLengthRefused) {
  std::vector<uint8_t> bytes(22);
  CheckResult r = check_encoded(Encoding::BF16, bytes.data(), bytes.size(), 10);
  EXPECT_EQ(r.kind, CheckResult::kWrongLength);
  EXPECT_NE(r.why.find("bf16 payload of 22 bytes, expected 20"), std::string::npos) << r.why;
}

}  // namespace
}  // namespace pshard::compression
